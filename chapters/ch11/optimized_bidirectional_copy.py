"""The same two copies on two streams: the device -> host and host -> device DMAs run at the same time.

The one idea: the GPU has separate copy engines for the two directions and PCIe carries both at once;
only stream order kept them apart. Each copy gets its own side stream, forked from and joined back to
the current stream (common.fork / common.join), so the call still ends only when both have landed.

What it should buy on an H100: the call takes as long as one copy, ~2.7 ms instead of ~5.4 ms, so up to
2x; expect ~1.6-1.9x, since a host's memory system and IOMMU often deliver less than the full rate in
both directions at once (the ceiling: 2 x 128 MiB / 2 x 64 GB/s ≈ 2.1 ms at the nominal rate). On a
CPU run the copies are host memcpys in order: same output, no speedup.

Timed with the default cuda_event clock, as the baseline. Work per call: as the baseline (common.Swap).
"""

from chapters.ch11.common import Swap


class BothWays(Swap):
    streams = 2


def get_benchmark() -> BothWays:
    return BothWays()
