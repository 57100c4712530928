"""The same imbalanced layer, dropless and unpadded: tokens sorted by expert and every expert's GEMM in one grouped
GEMM (``torch._grouped_mm``) over exactly its rows, with no capacity and no host sync.

The one idea: let each expert's GEMM be as long as its load. The work is the 49,152 real rows whatever the
imbalance (MegaBlocks' dropless MoE), where padding to the max load multiplies 64 x the busiest expert's rows; a
capacity factor below the max load would cut the waste by dropping tokens, changing the layer's output.

Predicted on an H200 (not measured): 566 GFLOP at ~400-550 TFLOP/s (grouped tiles; uneven groups waste at most a
tile's rows each) ~1.0-1.4 ms plus the sort, gather and scatter (~0.1-0.2 ms): ~1.2-1.6 ms against ~3.5-4 ms,
~2.3-3x. Outputs agree with the padded dispatch to bf16 rounding (same rows, products and order of sums; rtol
1e-2 as ``moe_routing``). Clock: wall.
"""

from chapters.ch17.moe import SkewedMoE


def get_benchmark() -> SkewedMoE:
    return SkewedMoE(padded=False)
