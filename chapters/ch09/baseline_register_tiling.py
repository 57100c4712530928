"""fp32 GEMM 4096³ in CUDA C++ with shared-memory tiles but one output per thread.

``gemm_shared`` (cuda_kernels.GEMM), the textbook tiled kernel: blocks of 32 x 32 threads, each thread one element
of C; per K step of 32 the block stages a 32 x 32 tile of A and of B in shared memory, then each thread does 32
FMAs reading both operands from shared memory. Global traffic is 32x below the naive kernel's, but every FMA
still costs a shared-memory load (A's value a broadcast, B's one conflict-free row per warp): the SM's shared
memory delivers one warp-wide load a cycle against four warp-wide FMAs, so the FMA pipes idle most of the time.

Expected (predicted, not yet run on a GPU): about a quarter of the fp32 peak or less.

Work (both sides): 2 * 4096³ flops; A, B read and C written once at least (cuda_kernels.square_operands).
Roofline: fp32 compute; the optimized side is to reach the usual share of the measured fp32 peak.
"""

from chapters.ch09.cuda_kernels import gemm


def get_benchmark():
    return gemm("gemm_shared")
