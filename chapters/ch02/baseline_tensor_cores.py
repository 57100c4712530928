"""C = A @ B at 8192^3 on fp32 CUDA cores (TF32 off), the result delivered in bf16.

fp32 operands and a matmul with TF32 disabled run on the SMs' FP32 pipes (the CUDA cores), not on the
tensor cores: ~51 TFLOP/s measured on an H100 (INTEGRITY.md), 1.1 TFLOP per call -> ~21.5 ms. The
result is then rounded to bf16 (the consumer wants bf16; one 8192^2 pass, ~0.1 ms, under 1 % here).
set_float32_matmul_precision("highest") in setup is torch's default, set explicitly so this side means
CUDA cores even if the environment enabled TF32 (the manifest records it; teardown restores the previous
setting: common.Fp32Product).

Expected on an H100: ~21.5 ms, ~6-7 % of the measured bf16 matmul peak (the pct_of_peak figure is
against bf16: the output's dtype).

Work per call (both sides): 2MNK = 1.1 TFLOP; fp32 operands read and the bf16 result written once,
4(MK + KN) + 2MN bytes = 640 MiB (common.product).
"""

from chapters.ch02.common import Example, Fp32Product


def get_benchmark() -> Example:
    return Fp32Product("highest")  # no TF32: this side is about the CUDA cores
