"""Chapter 1: performance basics (host-device transfers, batching, launch overhead, fusion, goodput)."""
