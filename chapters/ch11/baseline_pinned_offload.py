"""Results streamed to pageable host memory: every copy blocks the host, so nothing overlaps.

The pipeline is the one the optimized side runs (common.Offload: matmul into a slot on the current
stream, copy to the host on a copy stream, events between them), but the destination is ordinary
pageable memory. A device -> pageable copy cannot be a DMA into memory the OS may move, so the driver
stages it through a pinned buffer of its own and ``copy_(non_blocking=True)`` returns only once the
bytes have landed: the host waits for chunk i's matmul and copy before it can queue chunk i+1's matmul,
and the staged copy runs at a fraction of the link rate. Expected on an H100 host: per chunk ~170 µs
matmul + 8 MiB at ~10-20 GB/s (~0.4-0.8 ms) ≈ 0.6-1 ms, ~10-16 ms per call.

Timed with the wall clock (timing_mode="cpu"): the loss is host-side waiting, which the default clock's
spin kernel would hide. Work per call: 128 MiB device -> host, 137 GFLOP (common.Offload).
"""

from chapters.ch11.common import Offload


class Pageable(Offload):
    pinned = False


def get_benchmark() -> Pageable:
    return Pageable()
