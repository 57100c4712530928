"""Chapter 8: occupancy and instruction-level parallelism — register pressure (num_warps), independent
dependency chains, divergent branches made branch-free, atomics vs a tree reduction."""
