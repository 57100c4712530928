"""Unified (managed) memory, CUDA C++: a kernel reads 256 MiB the CPU just wrote, pages migrating on fault.

The host writes 64 Mi fp32 into a ``cuMemAllocManaged`` buffer (its pages now on the host), then
``affine`` (cuda_kernels.AFFINE) reads it on the GPU: each first touch of a page faults, and the driver
migrates the faulting region (4 KiB to 2 MiB at a time, batched per fault group) while the warps that
touched it wait. Throughput is set by the fault service, not by the link.

Expected (predicted, not yet run on a GPU): a few GB/s of migration, several times under the link's copy
rate; the host's write (the same on both sides) adds its own time.

Timed with the wall clock (the host's writes are part of the call). Work per call: 256 MiB that must reach
the device, 2 flops per element.
Stated ceiling (cuda_kernels.Managed.ceiling): the host's write plus a pinned copy of the bytes to the device,
both timed in setup; the target is half of it.
"""

from chapters.ch06.cuda_kernels import Managed


def get_benchmark() -> Managed:
    return Managed(prefetch=False)
