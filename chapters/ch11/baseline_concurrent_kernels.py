"""16 small-grid, latency-bound kernels launched one after another on one stream.

Each sequence's exponential moving average (common.Scans, common.ema_scan) is a loop of dependent steps:
load x[t], h = a * h + (1 - a) * x[t], store h. Its 16 one-warp programs sit on 16 of the H100's 132 SMs
and spend each step waiting for memory (~0.5 µs: a load's latency, not its bandwidth), so a kernel takes
~steps x 0.5 µs whatever the GPU's width, and on one stream the next kernel starts only when it ends:
~88 % of the SMs idle throughout. Expected on an H100: Σ steps x ~0.5 µs ≈ 20,000 x 0.5 µs ≈ 10 ms.

Timed with the default cuda_event clock. Work per call: read x and write out, 8 B and 4 FLOPs per
element (~80 MiB); the kernels are latency-bound, far below both roofs.
"""

from chapters.ch11.common import Scans


def get_benchmark() -> Scans:
    return Scans()
