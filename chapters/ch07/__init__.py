"""Chapter 7: memory access patterns — coalescing, transpose, array-of-structs vs struct-of-arrays,
vectorized copies, gather locality, tiled matmul (reuse), software-pipelined loads, stencil blocking."""
