"""An FP8 MLP in eager PyTorch: the GEMMs on the FP8 tensor cores, every activation's quantisation a chain of
passes.

x [8192, 4096] -> 14336 -> 4096 with GELU, both GEMMs ``torch._scaled_mm`` in e4m3 (chapters/ch14/fp8.py): 1.9
TFLOP. Per call the quantisation of x (64 MiB bf16) and of the hidden activation (224 MiB bf16) each run abs, amax,
the scale and a multiply-and-cast as separate kernels, and GELU is one more pass: ~1.5 GB of elementwise traffic.

Predicted on an H100 or H200 (not measured): the GEMMs at ~1,100-1,300 TFLOP/s ~1.5-1.7 ms, the passes ~0.5 ms:
~2.0-2.2 ms. Clock: the default (CUDA events, L2 flushed).
"""

from chapters.ch14.fp8 import Fp8Mlp


def get_benchmark() -> Fp8Mlp:
    return Fp8Mlp(compiled=False)
