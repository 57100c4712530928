"""Chapter 18: attention — materialised scores vs fused flash kernels (SDPA and a Triton forward), causal tiles
skipped, a sliding window through FlexAttention's block mask, and flash-decoding's split over a long KV cache."""
