"""The same GEMM with register tiles: each thread computes an 8 x 8 block of C from shared memory.

The one change (``gemm_tiled``, cuda_kernels.GEMM, also ``cuda_gemm``'s optimized side): blocks of 256 threads
own a 128 x 128 tile of C, each thread an 8 x 8 sub-tile of accumulators held in registers. Per k a thread reads
8 values of A and 8 of B from shared memory (four 16-byte loads) and does 64 FMAs with them: 16 FMAs per shared
load instruction instead of one, so the FMA pipes, not shared memory, set the pace. The price: 64 accumulators
and 16 operands per thread (122 registers, ptxas for sm_90), M and N multiples of 128, K of 8.

Expected (predicted): 2-4x faster, about half of the fp32 peak.

Work: as the baseline; the same products summed in the same K order, so C agrees to fp32 rounding.
"""

from chapters.ch09.cuda_kernels import gemm


def get_benchmark():
    return gemm("gemm_tiled")
