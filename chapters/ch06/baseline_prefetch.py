"""256 MiB moved to the device on first touch, 64 KiB at a time, each piece used as it arrives.

What unified (managed) memory does when the GPU touches pages that live on the host, emulated with
ordinary copies: torch exposes no managed allocations, so each 64 KiB piece (the unified-memory driver's
basic migration block) is copied from pageable host memory right before the op that needs it runs on it.
Every piece pays a synchronous copy's fixed cost (driver call, staging through the driver's own
page-locked buffer, the host waiting) and a launch, for 64 KiB that the link moves in ~1.3 us: 4096
round trips, as a page fault's service is a round trip per migrated block.
Expected on an H100 host: 4096 x ~20-30 us ~ 80-120 ms (the real fault path is slower still: tens of us
per fault batch).

Timed with the wall clock (synchronous copies block the host). Work per call (both sides): 256 MiB to
the device and 2 flops per element (common.host_array).
"""

import torch

from chapters.ch06.common import Example, finish, host_array, host_input, wall_clock


def launch(operands: tuple, out: torch.Tensor) -> None:
    x, dev, page, _ = operands
    for start in range(0, x.numel(), page):
        stop = start + page
        dev[start:stop].copy_(x[start:stop])
        finish(dev[start:stop], out[start:stop])


def get_benchmark() -> Example:
    return Example(host_array, launch, wall_clock(), inputs=host_input)
