"""The same 512 grids launched from the device (dynamic parallelism): one host launch, no round trip.

The one idea: let the GPU launch the work it sized. ``launch_segments`` (cuda_kernels.SEGMENTS, compiled as
relocatable code and linked with the CUDA device runtime) runs one thread per segment; each reads its segment's
offsets in device memory and launches ``scale_segment`` with a grid sized to it into the fire-and-forget
stream, so the 512 grids run concurrently. The host launches once and never waits; the parent grid completes
when its children have, so the stream's order holds for what comes after. Here the same result would come
from one flat kernel in which each thread finds its segment; a device launch earns its place where the
children differ in shape or kind (a per-expert GEMM, an adaptive refinement, a recursion), which the host
could otherwise only launch after a round trip.

Expected on the H200 host: the device's launches (~1 µs each, many in parallel) and the 256 MiB of traffic:
~0.1-0.3 ms, ~10-30x faster; the stated ceiling is one flat pass over the same bytes (target 50 %).

Timed and counted as the baseline. Needs a GPU, nvJitLink and libcudadevrt (skipped with the reason elsewhere).
"""

from chapters.ch12.launch_kernels import Segments


def get_benchmark() -> Segments:
    return Segments(on_device=True)
