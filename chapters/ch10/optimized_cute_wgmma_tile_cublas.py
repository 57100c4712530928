"""The same fp16 product through the library: ``torch.matmul`` (cuBLAS), fp32 accumulation, fp16 out.

What the CuTe DSL kernels are measured against, and checked against: cuBLAS's Hopper kernels (TMA, wgmma,
warp-specialised producer and consumer warpgroups, persistent tile scheduling). The harness compares its
output with the baseline's, so a wrong CuTe kernel fails here even when both CuTe sides agree.

Expected (predicted): 70-85 % of the H200's fp16 peak.

Work: as the baseline (same inputs, same output; the harness compares them).
"""

from chapters.ch01.common import Example
from chapters.ch10.cute_gemm import gemm_operands, library


def get_benchmark() -> Example:
    return Example(gemm_operands, library)
