"""fp32 GEMM in CUDA C++ by 128 x 128 block tiles and 8 x 8 register tiles per thread.

The one idea (``gemm_tiled``, cuda_kernels.GEMM): raise the FLOPs per byte loaded at every level. A
block stages a 128 x 8 slice of A and an 8 x 128 slice of B in shared memory (each global element now
feeds 128 FMAs instead of 1), and each thread keeps an 8 x 8 tile of C in registers, reading 16 values
per k from shared memory (four 16-byte loads) for 64 FMAs. ptxas's registers per thread (~120, two blocks
per SM) are recorded with the run (``size.cuda.gemm_tiled.registers``).

Expected (predicted): 15-25 TFLOP/s, 30-50 % of the fp32 peak: no double buffering of the shared tiles
and no tensor cores (the library's variant, ``optimized_cuda_gemm_cublas``, shows what is left).

Work: as the baseline.
"""

from chapters.ch09.cuda_kernels import gemm


def get_benchmark():
    return gemm("gemm_tiled")
