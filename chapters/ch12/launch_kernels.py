"""Chapter 12's CUDA C++ kernels with a device-side launch (``bench.cuda_source(..., device_runtime=True)``: compiled
as relocatable code and linked with the CUDA device runtime) and the ``device_launch`` shell.

The problem: per-segment work whose sizes only the device knows. A router on the GPU has assigned 32 Mi token
values to 512 segments (experts) of uneven sizes (``offsets`` in device memory); each segment's values are
scaled by its own gate, one grid per segment sized to it. The host-driven way must bring the offsets to the
host (a copy and a wait) and launch 512 grids itself; a parent kernel can launch them from the device
(dynamic parallelism), one thread per segment, with no round trip and one host launch.

The kernels compile on any host (tests/chapters/test_cuda_sources.py: the relocatable PTX, and the link where
nvJitLink and libcudadevrt are installed); the variants need a GPU and skip with the reason elsewhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bench import context, cuda_source, time_alone
from chapters.ch01.common import stated_ceiling
from chapters.ch12.common import generator, randn, wall_clock

THREADS = 256

SEGMENTS = cuda_source(
    r"""
// out[i] = x[i] * gates[s] for i in segment s = [begin, end): one grid per segment, sized to it.
extern "C" __global__ void scale_segment(const float* __restrict__ x, float* __restrict__ out,
                                         const float* __restrict__ gates, int s, long long begin, long long end) {
    const long long i = begin + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < end) out[i] = x[i] * gates[s];
}

// One thread per segment launches that segment's grid from the device (dynamic parallelism). The grids go to
// the fire-and-forget stream, so they run concurrently; the parent grid completes only when they all have,
// which keeps the launching stream's order for whatever the host queued after it.
extern "C" __global__ void launch_segments(const float* __restrict__ x, float* __restrict__ out,
                                           const float* __restrict__ gates, const long long* __restrict__ offsets,
                                           int segments) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= segments) return;
    const long long begin = offsets[s], end = offsets[s + 1];
    if (end <= begin) return;
    const unsigned blocks = (unsigned)((end - begin + 255) / 256);
    scale_segment<<<blocks, 256, 0, cudaStreamFireAndForget>>>(x, out, gates, s, begin, end);
}
""",
    name="segments.cu",
    device_runtime=True,
)


def segment_offsets(n: int, segments: int) -> torch.Tensor:
    """``segments + 1`` offsets on the run's device splitting ``n`` values into segments of seeded random sizes
    (0 to ~2x the mean: a router's uneven load), computed there as a router's would be."""
    weights = torch.rand(segments, generator=generator(2), device=context().device)
    sizes = torch.floor(weights / weights.sum() * n).long()
    sizes[-1] += n - sizes.sum()  # every value in exactly one segment (the floors sum to at most n)
    offsets = torch.zeros(segments + 1, dtype=torch.long, device=sizes.device)
    torch.cumsum(sizes, 0, out=offsets[1:])
    return offsets


class Segments:
    """device_launch: 32 Mi fp32 values in 512 segments of seeded random sizes (0 to ~2x the mean, their offsets
    computed on the device), each scaled by its gate into ``out``. ``on_device``: one parent launch; otherwise the
    offsets come to the host and the host launches one grid per segment.

    Timed with the wall clock: the host's round trip and launches are the baseline's cost. Work: x read and out
    written, 4 + 4 B per value. Stated ceiling: one flat pass over the same bytes (x scaled into a scratch
    buffer), timed alone in setup: the copy roof with no launch cost at all; target 50 %."""

    def __init__(self, on_device: bool) -> None:
        self.on_device = on_device

    def get_config(self) -> Any:
        return wall_clock()

    def setup(self) -> None:
        ctx = context()
        name = "launch_segments" if self.on_device else "scale_segment"
        self.kernel = SEGMENTS.kernel(name)  # skips on a host without a GPU, nvJitLink or libcudadevrt
        n, segments = ctx.size((32 * 2**20, 512), (3000, 7))
        self.x = randn(ctx.record("values", n), offset=0)
        self.gates = torch.rand(ctx.record("segments", segments), generator=generator(1), device=ctx.device)
        self.offsets = segment_offsets(n, segments)
        self.out = torch.empty_like(self.x)
        self.work: dict[str, Any] = {"bytes": 8 * n}
        scratch = torch.empty_like(self.x)
        what = "one flat pass over the same values (x scaled into a scratch buffer), timed alone in setup"
        self.work |= stated_ceiling(what, time_alone(lambda: torch.mul(self.x, 0.5, out=scratch)), target_pct=50.0)

    def benchmark_fn(self) -> None:
        if self.on_device:
            segments = self.gates.numel()
            self.kernel(-(-segments // THREADS), THREADS, self.x, self.out, self.gates, self.offsets,
                        np.int32(segments))  # fmt: skip
            return
        offsets = self.offsets.tolist()  # the sizes to the host: a device-to-host copy and a wait
        for s in range(len(offsets) - 1):
            begin, end = offsets[s], offsets[s + 1]
            if end > begin:
                self.kernel(-(-(end - begin) // THREADS), THREADS, self.x, self.out, self.gates, np.int32(s),
                            np.int64(begin), np.int64(end))  # fmt: skip

    def teardown(self) -> None:
        for name in ("kernel", "x", "gates", "offsets", "out"):
            self.__dict__.pop(name, None)

    def get_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x, self.gates

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_work(self) -> dict[str, Any]:
        return self.work
