"""bf16 matmul at 8192³ through cuBLAS: the reference an FP8 matmul must beat.

out = x @ w.T with x [8192, 8192] activations and w [8192, 8192] weights, both bf16; fp32 accumulation
on the tensor cores, bf16 out. Predicted on an H100 (not measured here): at the measured bf16 matmul rate
(757-777 TFLOP/s, ``perflab peak``) 1.1 TFLOP takes ~1.42-1.45 ms. Its error against an fp32 reference
(bf16 inputs, bf16 output rounding) is recorded as ``rel_err_vs_fp32`` (~2e-3).

Clock: the default (CUDA events, L2 flushed, launch latency hidden). Work per call: 2MNK = 1.1 TFLOP;
bytes of the bf16 problem (x, w read, out written: 384 MiB).
"""

from chapters.ch19.common import Gemm


def get_benchmark() -> Gemm:
    return Gemm()
