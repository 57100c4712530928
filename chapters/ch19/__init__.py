"""Chapter 19: low precision — FP8 matmuls with per-tensor and row-wise scales, the cost of quantising,
int8 weight-only decode, an FP8 KV cache; each pair's accuracy stated beside its speed."""
