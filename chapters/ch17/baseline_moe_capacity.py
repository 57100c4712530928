"""An MoE layer with an imbalanced router, every expert padded to the busiest expert's load and run as one
batched GEMM: the padding is multiplied too.

64 experts (GELU MLP 2048 -> 1408 -> 2048, bf16), top 6 of 8192 tokens, the router's logits tilted by a per-expert
bias from +1.5 to -1.5 (chapters/ch17/moe.py, ``SkewedMoE``): the busiest expert gets ~4x the mean load (49,152
token-expert rows, ~3,100 for it against a mean of 768). Dropless dispatch with static shapes: the capacity is the
max load (one host sync), the rows scattered into a zeroed [64, capacity, 2048] buffer, ``torch.bmm`` twice, the
real rows gathered back. 566 GFLOP of useful expert GEMMs become ~64 x 3,100 rows' worth: ~2.3 TFLOP.

Predicted on an H200 (not measured): ~2.3 TFLOP at ~650-750 TFLOP/s (large, regular bmm tiles) ~3.1-3.6 ms, plus
the padded buffers' passes (zero fill, scatter, the hidden state and GELU over 64 x capacity rows, the bmm output:
~4-5 GB, ~1.2-1.5 ms), routing, sort and the sync: ~5-5.5 ms per call. Clock: wall (the sync is part of the
dispatch). Work declared: the useful FLOPs (the same on both sides).
"""

from chapters.ch17.moe import SkewedMoE


def get_benchmark() -> SkewedMoE:
    return SkewedMoE(padded=True)
