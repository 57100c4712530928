"""A 32768-bin histogram of 256 Mi token ids in CUDA C++, every element an atomic add in global memory.

The values follow Zipf's law over the bins (cuda_kernels.zipf: rank k's share ∝ 1 / (k + 1), as word counts in
text): rank 0 takes 9.1 % of them, the first 32 ranks, one 128-byte line of counts, 37 %. The histogram (128 KiB
of counts) is larger than the 48 KiB of static shared memory one block may declare, so the usual privatisation
(a copy per block in shared memory) does not apply as written; ``histogram_global`` (cuda_kernels.HISTOGRAM)
adds each element straight into the global counts. The adds are resolved by L2's atomic units, and adds to one
line are applied one after another: every SM's adds to the hot head meet in a few lines of one L2 slice.

Expected (predicted, not measured): bound by the hot lines' atomics, far under the 4 bytes per element DRAM alone
would allow (chapter 8's shared_atomics, 256 bins in 8 lines: 69.1 ms for 256 Mi adds on an H200).

Work (both sides): 1 GiB of int32 read, 128 KiB of counts written (cuda_kernels.values); the counts are
zeroed inside each call on both sides.
"""

from chapters.ch10.cuda_kernels import histogram


def get_benchmark():
    return histogram("histogram_global")
