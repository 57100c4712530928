"""A bf16 GEMM (fp32 accumulate) in CUDA C++ on the CUDA cores: 4096³ through ``cuda_gemm``'s register tiles.

``gemm_tiled_bf16`` (cuda_kernels.GEMM): ``gemm_tiled``'s 128 x 128 block tiles and 8 x 8 register tiles per thread,
the bf16 operands widened to fp32 as they are staged in shared memory, then fp32 FMAs: at best the fp32 FMA peak
(~51 TFLOP/s measured on the H200), an order of magnitude under what the tensor cores do with the same bf16 operands.

Expected (predicted, not yet run on a GPU): as ``cuda_gemm``'s optimized side (~5 ms, ~half the fp32 peak).

Work (both sides): 2 * 4096³ flops from bf16 operands into fp32 C (cuda_kernels.bf16_operands); roofline: the bf16
tensor-core peak (``dtype``). Outputs compared at rtol 1e-4 (cuda_kernels.bf16_gemm says why).
"""

from chapters.ch09.cuda_kernels import bf16_gemm


def get_benchmark():
    return bf16_gemm("gemm_tiled_bf16")
