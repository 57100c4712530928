"""The same sum with the loop unrolled by hand: 8 independent loads per thread in flight.

The one change (``partial_sums_unrolled``, cuda_kernels.PARTIAL_SUMS): each iteration issues the loads of 8
grid strides into registers first, then adds them in the same order. The loads do not depend on each other, so
all 8 are in flight together: memory-level parallelism from one thread (instruction-level parallelism) instead of
from more threads, 64 KiB per SM in flight. Same elements per thread in the same order of addition: the sums
agree bit for bit.

Expected (predicted): near copy bandwidth, 2-3x faster.

Work: as the baseline.
"""

from chapters.ch08.cuda_kernels import partial_sums


def get_benchmark():
    return partial_sums("partial_sums_unrolled")
