"""fp32 GEMM in CUDA C++, one thread per element of C: every FMA loads its two operands.

``gemm_naive`` (cuda_kernels.GEMM): thread (row, col) walks K, reading A[row, k] (the same for a warp's 32
lanes: a broadcast) and B[k, col] (coalesced across the warp). Arithmetic intensity at the SM is 2
flops per 8 bytes loaded from L1/L2; L1 and L2 catch much of the reuse, but the load pipe, not the FMA
units, sets the pace.

Expected (predicted, not yet run on a GPU): a few TFLOP/s, far under the fp32 peak (H100: 51.5 TFLOP/s
measured); the tiled kernel 3-6x faster.

Work (both sides): 2 x 4096^3 flops, 4 x 64 MiB operands (cuda_kernels.square_operands).
"""

from chapters.ch09.cuda_kernels import gemm


def get_benchmark():
    return gemm("gemm_naive")
