"""Host -> device copy of 256 MiB from pageable memory.

Pageable memory may move or be swapped, so the copy engine cannot read it directly: the driver copies
it piece by piece into its own page-locked staging buffer with the CPU, then lets the DMA engine move
each piece, and the host thread waits for the lot. The CPU memcpy and the DMA take turns.
Expected on an H100 host (PCIe Gen5 x16, 64 GB/s nominal per direction, not measured here): ~10-25 GB/s,
~10-25 ms per call, host-dependent (memcpy speed, IOMMU).

Timed with the wall clock (timing_mode="cpu"): the copy blocks the host. On a CPU-only machine the
"device" is host memory and both sides do the same memcpy (no page-locked memory without CUDA).

Work per call (both sides): 256 MiB across the host link (common.host_tensor).
"""

import torch

from chapters.ch02.common import Example, host_tensor, wall_clock


def launch(src: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(src)


def get_benchmark() -> Example:
    return Example(lambda: host_tensor(pinned=False), launch, wall_clock())
