"""The same matmul on FP8 tensor cores, one scale per tensor.

The one idea: feed the tensor cores float8_e4m3fn codes instead of bf16; Hopper runs FP8 MMAs at twice
the bf16 rate (measured by ``perflab peak`` on H100s: 1370-1474 TFLOP/s against 757-777). Every call pays
for quantising its activations: x's max (torch, one 128 MiB read), then one Triton kernel that casts
x * 448/max to FP8 (128 MiB read, 64 MiB written) and stores 1/s for the matmul; ``torch._scaled_mm``
multiplies the codes with fp32 accumulation and applies both scales to the bf16 output. The weights are
quantised once, in setup, as a deployment quantises them when it loads them: that cost is excluded, and
only x is changed by the harness's input check.

Predicted on an H100 (not measured): matmul 1.1 TFLOP / ~1400 TFLOP/s ~ 0.79 ms, quantising x ~320 MiB at
~2.9 TB/s ~ 0.11 ms: ~0.9 ms against ~1.43 ms, ~1.55-1.65x (target >= 1.5x); ceiling 1.8-1.9x, the FP8:bf16
rate ratio, were quantisation free. Accuracy: FP8 inputs carry ~3.5 % relative error each; the output is
~4-5 % from the fp32 reference (``rel_err_vs_fp32``) and verified against the bf16 baseline with rtol 0.08.
Needs compute capability 8.9+ (skipped otherwise). On Blackwell the book would go on to block-scaled
MXFP8/NVFP4 (tcgen05 MMAs, a scale per 16-32 elements): Hopper has neither, so this chapter stops at FP8.

Clock and work: as the baseline (2MNK FLOPs; the bf16 problem's bytes).
"""

from chapters.ch19.common import Fp8Gemm


def get_benchmark() -> Fp8Gemm:
    return Fp8Gemm(rowwise=False)
