"""Reports, roofline, proof of benefit and regression detection (issue: analysis). Depends on bench only."""
