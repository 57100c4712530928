"""The same FP8 matmul with row-wise scales: one per row of x (per token), one per output channel of w.

The one idea beside FP8 itself: a scale per row instead of one per tensor, so a row of small values
(a quiet token, a small channel) uses FP8's whole range instead of sharing the largest row's. Quantising x
becomes one Triton kernel (the row's max and its cast in registers: 128 MiB read, 64 MiB written, one pass
instead of the per-tensor side's two), and ``torch._scaled_mm`` applies ``scale_a`` [M, 1] and ``scale_b``
[1, N] in its epilogue (a CUTLASS row-wise kernel on sm_90). The weights are quantised once, in setup.

Predicted on an H100 (not measured): quantising ~65 µs; the row-wise matmul (a CUTLASS kernel applying
both scale vectors in its epilogue) may run a little slower than the per-tensor one: ~0.85-1.0 ms,
~1.4-1.7x the bf16 baseline. Accuracy: on these Gaussian inputs as the per-tensor side's (~3.5-3.8 %);
rows that differ by 10^4 or more (beyond e4m3's range under one scale) keep their precision only with
their own scale (tests/chapters/test_ch19_lowp.py). Verified with rtol 0.08. Needs compute capability 8.9+.

Clock and work: as the baseline.
"""

from chapters.ch19.common import Fp8Gemm


def get_benchmark() -> Fp8Gemm:
    return Fp8Gemm(rowwise=True)
