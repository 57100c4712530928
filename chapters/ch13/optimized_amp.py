"""The same two steps under ``torch.autocast(dtype=torch.bfloat16)``: matmuls on the tensor cores.

The one idea: autocast runs matmuls (and attention) in bf16 and keeps what needs range in fp32 (LayerNorm,
softmax, the loss); the weights and their gradients stay fp32 (autocast casts each weight on its way into
a matmul), so the optimizer is unchanged and no loss scaling is needed (bf16 has fp32's exponent range).
Activations saved for the backward are half the size, too.

What to see in the profile: the GEMMs become ``sm90_xmma_gemm_bf16``/``nvjet``-named kernels at a fraction
of the time, and new small ``to_copy`` kernels appear (the casts: each weight once per forward).

Predicted on an H100: 3.6 TFLOP at ~350-450 TFLOP/s ≈ 8-10 ms, plus the casts (~70 M weights read as fp32,
written as bf16, per step: ~0.4 GB ≈ 0.15 ms) and the elementwise passes at half the bytes: ~12-18 ms per
call, ~5-7x. Ceiling: the bf16 matmul rate (~755 TFLOP/s), ~5 ms.

Precision: the losses and updates differ from fp32's by ~1 % of their norm; the pair's tolerance is 5 %
(common.Amp; a side that skipped training would be off by 100 %). Work and clock: as the baseline.
"""

from chapters.ch13.common import Amp


def get_benchmark() -> Amp:
    return Amp(amp=True)
