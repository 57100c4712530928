"""Chapter 14: compilers (torch.compile on a block, max-autotune, a hand Triton kernel, a chunked loss)."""
