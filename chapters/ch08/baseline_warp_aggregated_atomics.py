"""Counting 64 Mi labels into 4 categories, CUDA C++, one atomic add per element.

``count_per_element`` (cuda_kernels.COUNT): each thread adds 1 to ``counts[x[i]]`` in global memory. The
four counters share one 32-byte sector, owned by one L2 slice, which executes atomics to an address one
at a time: the whole GPU's 64 Mi atomics queue at one slice, and a warp's 32 lanes send 32 of them to at
most 4 addresses.

Expected (predicted, not yet run on a GPU): bound by that one slice's atomic rate, far under the DRAM
rate at which the labels could be read.

Work (both sides): 256 MiB of int32 labels read, 4 counts written (cuda_kernels.categories); the counts are
zeroed inside each call on both sides.
"""

from chapters.ch08.cuda_kernels import count


def get_benchmark():
    return count("count_per_element")
