"""A sparse read of a host table through the host: the indices come back, the CPU gathers, one copy goes out.

65 536 rows of 256 B (16 MiB) picked at random from a 1 GiB page-locked table, at indices a GPU computation left
in device memory (cuda_kernels.HostTable). The explicit way: copy the indices to the host (a wait for the GPU),
gather the rows on the CPU into a page-locked staging buffer (random 256 B reads over 1 GiB: cache and TLB misses
at every row), then one DMA of the 16 MiB to the device. Copying the whole table instead, to gather on the
device, would move 64x the bytes (1 GiB at ~55 GB/s: ~20 ms) for rows read once.

Expected on the H200 host: the host gather ~3-8 ms (a few GB/s of random rows), the copy ~0.3 ms at ~55 GB/s.

Timed with the wall clock. Work per call (both sides): the 16 MiB of rows delivered and the indices read.
Runs on a CPU too (ordinary memory, no copy), where the optimized side skips: it needs a GPU.
"""

from chapters.ch02.cuda_kernels import HostTable


def get_benchmark() -> HostTable:
    return HostTable(zero_copy=False)
