"""Work sized on the device, launched from the host: the segment offsets come back, then 512 launches.

A router on the GPU left 32 Mi values in 512 segments of uneven sizes (cuda_kernels.Segments); each segment
gets a grid sized to it (``scale_segment``, CUDA C++). The host cannot size the grids without the offsets: it
copies them over (a device-to-host copy, so a wait for everything queued before), then launches 512 grids one
by one, each a few µs of host time (cuda.core, the driver), each a few µs of GPU time (64 Ki values, 512 KiB
moved). The GPU idles during the round trip and waits on the host's launches after.

Expected on the H200 host: ~512 x 5-10 µs of launches ≈ 2.5-5 ms, against ~70 µs of memory traffic (256 MiB at
4.2 TB/s).

Timed with the wall clock. Work per call (both sides): x read and out written (256 MiB).
Needs a GPU (skipped with the reason elsewhere).
"""

from chapters.ch12.launch_kernels import Segments


def get_benchmark() -> Segments:
    return Segments(on_device=False)
