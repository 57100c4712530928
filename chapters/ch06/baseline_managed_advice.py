"""Unified (managed) memory read by both processors, CUDA C++, no advice: the pages ping-pong.

A 256 MiB table in a ``cuMemAllocManaged`` buffer, written by the host once in setup, is read every call by
``affine`` on the GPU (cuda_kernels.AFFINE) and then by the CPU (a float64 sum over every element). Neither ever
writes it again, but the driver does not know that: a page lives in one place, so the kernel's first touch of each
page faults and migrates it to the GPU, and the CPU's read faults and migrates it back. 512 MiB cross the link by
page faults every call.

Expected (predicted, not yet run on a GPU): dominated by fault-driven migration at a few GB/s each way, several
times the CPU's own read of the table.

Timed with the wall clock (the CPU's read is part of the call). Work per call (both sides): the table read by both
processors, 256 MiB each. Stated ceiling (cuda_kernels.ReadShared): the CPU's sum over the same table in ordinary
host memory, timed in setup; the target is 70 % of it.
"""

from chapters.ch06.cuda_kernels import ReadShared


def get_benchmark() -> ReadShared:
    return ReadShared(advise=False)
