"""A long sum in CUDA C++, one load in flight per thread: each element's DRAM latency paid in turn.

``partial_sums_rolled`` (cuda_kernels.PARTIAL_SUMS): a full-occupancy grid (8 blocks of 256 threads per SM) in
which each thread walks its elements with a grid stride, ``acc += x[i]``, the loop kept rolled
(``#pragma unroll 1``): the next load is issued only after the add that needs the last one. At 2048 threads per SM
that is 8 KiB of loads in flight per SM, a fraction of what HBM's latency-bandwidth product needs; occupancy is
already at its limit, so more threads cannot make up for it.

Expected (predicted, not yet run on a GPU): latency-bound, under half of copy bandwidth.

Work (both sides): 256 Mi fp32 read once (1 GiB), one add an element, 1056 partial sums written
(cuda_kernels.long_vector). Roofline: memory (4 bytes an element).
"""

from chapters.ch08.cuda_kernels import partial_sums


def get_benchmark():
    return partial_sums("partial_sums_rolled")
