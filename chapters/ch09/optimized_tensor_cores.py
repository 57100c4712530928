"""The same bf16 GEMM on the tensor cores, by hand: ``mma.sync.m16n8k16`` from shared-memory tiles.

The one change (``gemm_mma_bf16``, cuda_kernels.GEMM): the same 128 x 128 block tiles and 64 fp32 accumulators per
thread, but each warp's 64 x 32 share of C is 4 x 4 fragments of 16 x 8, each updated by one warp-wide
``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` (4096 flops an instruction instead of 64 for a warp's FMA).
A and B stay bf16 in shared memory (B transposed, rows padded against bank conflicts) and are read as 32-bit
fragment registers in the PTX ISA's layout. No ``ldmatrix``, no cp.async pipeline, no wgmma: the plain Ampere-style
form of the instruction, far from cuBLAS (chapter 8's Triton matmul reaches the bf16 peak with wgmma and TMA).

Expected (predicted): several times faster than the CUDA cores, a fifth to a third of the bf16 peak.

Work: as the baseline.
"""

from chapters.ch09.cuda_kernels import bf16_gemm


def get_benchmark():
    return bf16_gemm("gemm_mma_bf16")
