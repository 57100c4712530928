"""A swap on one stream: 128 MiB device -> host, then 128 MiB host -> device, one after the other.

Both copies are between the device and pinned host memory, so each is a DMA at the host link's rate, but
one stream runs them in order: the host -> device engine waits until the device -> host copy is done,
and each direction of the (full-duplex) PCIe link idles half the time. Expected on an H100: 2 x 128 MiB
/ ~50 GB/s ≈ 5.4 ms (PCIe Gen5 x16: 64 GB/s per direction nominal, ~50-55 GB/s achieved from pinned
memory).

Timed with the default cuda_event clock. Work per call: 256 MiB over the host link (common.Swap).
"""

from chapters.ch11.common import Swap


def get_benchmark() -> Swap:
    return Swap()
