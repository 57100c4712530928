"""Row sums with warp shuffles: each warp reduces in registers, one barrier per block.

The one change: ``__shfl_xor_sync`` passes values between a warp's lanes without shared memory or a
barrier. Each warp sums its 32 partial sums in 5 shuffles, lane 0 of each writes one value to shared
memory, one ``__syncthreads()``, and the first warp sums the 8 warp sums the same way: 1 barrier instead
of 8, 8 shared-memory values instead of 256 + 8 rounds. The same additions in another order: the sums
match to fp32 rounding.

Expected (predicted): closer to copy bandwidth than the tree, 1.1-1.3x faster.

Work: as the baseline.
"""

from chapters.ch08.cuda_kernels import row_sums


def get_benchmark():
    return row_sums("row_sums_shuffle")
