"""A 32768-bin histogram of 256 Mi values in CUDA C++, every element an atomic add in global memory.

The histogram (128 KiB of counts) is larger than the 48 KiB of static shared memory one block may
declare, so the usual privatisation (a copy per block in shared memory) does not apply as written;
``histogram_global`` (cuda_kernels.HISTOGRAM) adds each element straight into the global counts. The
adds are resolved by L2's atomic units: one L2 transaction per element, 32 per warp instruction,
scattered over 128 KiB.

Expected (predicted, not yet run on a GPU): bound by L2 atomic throughput, well under the 4 bytes per
element DRAM alone would allow.

Work (both sides): 1 GiB of int32 read, 128 KiB of counts written (cuda_kernels.values); the counts are
zeroed inside each call on both sides.
"""

from chapters.ch10.cuda_kernels import histogram


def get_benchmark():
    return histogram("histogram_global")
