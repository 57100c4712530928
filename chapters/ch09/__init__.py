"""Chapter 9: arithmetic intensity — fusing an elementwise chain, a GEMM's bias and activation in its
epilogue, reductions that keep their tile on chip, recomputing instead of storing, tile size and reuse."""
