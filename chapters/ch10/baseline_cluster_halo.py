"""256 steps of a 1-D stencil over rows too long for one block, CUDA C++: one kernel per step.

96 rows of 32 Ki fp32 (128 KiB a row; two buffers of it, 256 KiB, are more than one SM's 227 KiB of shared
memory), each step u <- u + 0.25 (left - 2u + right), zero beyond a row's ends. Each point needs its
neighbours from the previous step, so without a way for blocks on different SMs to meet, a step ends at
a kernel boundary: ``heat_step`` (cuda_kernels.HEAT) runs once per step, reading the previous step from
global memory (12 MiB: served by L2) and writing the next, 256 launches per call.

Expected (predicted, not yet run on a GPU): a few µs per step (a launch's ramp and drain, 24 MiB through
L2; the host's launch through cuda.core, ~5 µs, overlaps the previous step), 1-2 ms per call.

Work (both sides): x read once, the result written once (24 MiB), 5 flops per point per step
(cuda_kernels.heat_rows); the rate is far from either roofline ceiling: the pair is about where steps meet.
"""

from chapters.ch10.cuda_kernels import GlobalHalo


def get_benchmark() -> GlobalHalo:
    return GlobalHalo()
