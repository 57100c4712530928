"""Chapter 7: memory access patterns (coalescing, transpose, array-of-structs vs struct-of-arrays)."""
