"""The same read-back with the buffer prefetched to the host before the CPU reads it.

The one change: ``cuMemPrefetchAsync`` of the whole buffer to the host (a ``CU_MEM_LOCATION_TYPE_HOST`` location,
cuda_kernels.prefetch) on the kernel's stream, right after the launch. The driver moves the pages in bulk at the
link's copy rate once the kernel is done, and the CPU then reads host-resident pages without a fault. The kernel,
the host's wait and the CPU's read are as in the baseline.

Expected (predicted): the read-back near the link's device-to-host rate; the whole call 1.5-3x faster (both sides
pay alike for the kernel's own faults, as the pages come back to the GPU each call).

Timed with the wall clock. Work per call and stated ceiling: as the baseline.
"""

from chapters.ch06.cuda_kernels import ReadBack


def get_benchmark() -> ReadBack:
    return ReadBack(prefetch=True)
