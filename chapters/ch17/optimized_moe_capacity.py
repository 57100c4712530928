"""The same imbalanced layer, dropless and unpadded: tokens sorted by expert and every expert's GEMM in one grouped
GEMM (``torch._grouped_mm``) over exactly its rows, with no capacity and no host sync.

The one idea: let each expert's GEMM be as long as its load. The work is the 49,152 real rows whatever the
imbalance (MegaBlocks' dropless MoE), where padding to the max load multiplies 64 x the busiest expert's rows; a
capacity factor below the max load would cut the waste by dropping tokens, changing the layer's output.

Predicted on an H200 (not measured for this layer): ``moe_routing``'s optimized side, this code on 4096 tokens of a
balanced router, read 1.79 ms per call on an H200 (docs/results/h200.md); twice the rows, ~3-3.6 ms (uneven groups
waste at most a tile's rows each), against ~5-5.5 ms: ~1.5-1.8x. Outputs agree with the padded dispatch to bf16
rounding (same rows, products and order of sums; rtol 1e-2 as ``moe_routing``). Clock: wall.
"""

from chapters.ch17.moe import SkewedMoE


def get_benchmark() -> SkewedMoE:
    return SkewedMoE(padded=False)
