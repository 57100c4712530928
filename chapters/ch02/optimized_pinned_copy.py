"""The same 256 MiB copied from page-locked (pinned) host memory.

The one idea: allocate the host buffer page-locked (cudaHostAlloc, in setup, as a loader's staging
buffer would be), so the DMA engine reads it directly at link speed: no CPU staging copy, and the host
thread is free once the copy is queued (non_blocking=True; the harness synchronizes before stopping the
clock). Expected on an H100 host: ~50 GB/s on PCIe Gen5 x16 (nominal 64; the link is the ceiling,
measured by neither `perflab peak` nor this chapter), ~5 ms per call, ~2-4x faster than pageable.

Timed with the wall clock, as the baseline. On a CPU-only machine page-locked memory does not exist
(it needs the CUDA driver): the source stays pageable, both sides do the same memcpy, and the result's
``host_memory`` size says "pageable".

Work per call: as the baseline (common.host_tensor).
"""

import torch

from chapters.ch02.common import Example, host_tensor, wall_clock


def launch(src: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(src, non_blocking=src.is_pinned())


def get_benchmark() -> Example:
    return Example(lambda: host_tensor(pinned=True), launch, wall_clock())
