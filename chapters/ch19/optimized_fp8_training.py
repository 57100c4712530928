"""The same eight steps with the block's four projections in FP8, forward and backward (``torch._scaled_mm``
in a custom autograd function, compiled as the baseline is; torchao and Transformer Engine are not on the GPU
image, see the README).

The one idea: the FP8 tensor cores run at about twice the bf16 rate (``perflab peak`` on the H200: ~1,420 against
~740 TFLOP/s). Each GEMM's operands are scaled to their format's range by their own max in this call (tensorwise
dynamic scaling, torchao's default recipe): forward e4m3 x e4m3, the two backward GEMMs with the gradient in
e5m2. Inductor fuses each cast into two passes (the max, then scale, cast and the transposed copy the backward
GEMM's layout needs); eager, the same casts were ~10 passes per operand in fp32, and on a smaller block (d 4096,
2048-token sequences: attention a tenth of the FLOPs) the pair read 0.84x on the H200.

Predicted on an H200 (not measured): the projections at ~1,200 TFLOP/s ~ 33 ms per step, the casts ~3 ms (~10 GB
of max, cast and transposed writes), the rest as bf16 (~9 ms): ~45 ms per step, ~360 ms per call, ~1.4-1.5x.
Quality: the eight losses and the held-out one within 1 % of bf16's, norm-wise (the pair's tolerance,
``RTOL_FP8_TRAINING``). Clock: wall.
"""

from chapters.ch19.training import BlockTraining


def get_benchmark() -> BlockTraining:
    return BlockTraining(fp8=True)
