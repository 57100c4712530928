"""Unified (managed) memory read back by the CPU, CUDA C++: a kernel writes 256 MiB, the CPU faults it home.

Each call ``affine`` (cuda_kernels.AFFINE) writes 64 Mi fp32 into a ``cuMemAllocManaged`` buffer (its pages, on the
host after the previous call's read, migrate to the GPU on the kernel's faults), the host waits for the kernel,
then sums every value (float64) and copies out a sample (cuda_kernels.ReadBack). The CPU's first touch of each page
faults, and the driver migrates the faulting region back while the CPU thread waits: every page crosses the link
twice a call, each time behind a fault.

Expected (predicted, not measured): well over a pinned copy of the bytes plus the CPU's sum; the H200 measured
123 ms a call (docs/results/h200.md, 2026-11-29 call 6).

Timed with the wall clock (the CPU's read is part of the call). Work per call (both sides): 256 MiB written by the
GPU and read by the CPU. Stated ceiling (cuda_kernels.ReadBack.ceiling): a pinned device-to-host copy of the bytes
plus the CPU's sum over ordinary memory, timed in setup; the target is half of it.
"""

from chapters.ch06.cuda_kernels import ReadBack


def get_benchmark() -> ReadBack:
    return ReadBack(placed=False)
