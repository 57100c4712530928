"""The same eight steps with the block's four projections in FP8, forward and backward (``torch._scaled_mm``
in a custom autograd function; torchao and Transformer Engine are not on the GPU image, see the README).

The one idea: the FP8 tensor cores run at twice the bf16 rate (measured on the H100: 1370-1474 against 757-777
TFLOP/s, ``perflab peak``). Each GEMM's operands are scaled to their format's range by their own max in this
call (tensorwise dynamic scaling): forward e4m3 x e4m3, the two backward GEMMs with the gradient in e5m2. The
casts are eager passes (amax, scale, cast; and a transposed copy for each backward operand), ~10 per
projection per step: the price that torch.compile (torchao's float8) would fuse away.

Predicted on an H100 or H200 (not measured): the projections at ~1,100 TFLOP/s ~ 9 ms per step, the casts ~2-3
ms, the rest as bf16 (~2-3 ms): ~110-130 ms per call, ~1.3x. Quality: each step's loss within 1 % of bf16's
(the pair's tolerance, ``RTOL_FP8_TRAINING``). Clock: wall.
"""

from chapters.ch19.training import BlockTraining


def get_benchmark() -> BlockTraining:
    return BlockTraining(fp8=True)
