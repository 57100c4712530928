"""Two training steps of a GPT-style model in fp32: every matmul at the fp32 rate.

PyTorch's default float32 matmul precision is "highest": on an H100 a fp32 matmul runs on the CUDA cores
(~51 TFLOP/s measured for 8192³, INTEGRITY.md), not the tensor cores. The model: 8 blocks of d 768 (ff
3072, 12 heads), vocab 8192, 70 M parameters; each step 8 rows of 512 tokens, SGD with momentum
(common.Amp).

What to look for in the profile: device time almost all in fp32 GEMM kernels (``sgemm``/``cutlass_80_simt``-named
kernels in ``top_ops.md``), the tensor cores idle.

Predicted on an H100: 2 x 1.8 TFLOP of matmuls at ~45 TFLOP/s ≈ 80 ms, plus fp32 attention and elementwise
passes: ~85-95 ms per call. Work per call: 3.6 TFLOP (common.lm_flops). Clock: wall.
"""

from chapters.ch13.common import Amp


def get_benchmark() -> Amp:
    return Amp(amp=False)
