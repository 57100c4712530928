"""The same 16 kernels dealt in turn to 8 streams: up to 8 run at once, on different SMs.

The one idea: kernels on different streams may run concurrently; a kernel whose grid fills a few SMs
leaves room for others (an H100 runs up to 128 kernels at once). The streams fork from the current
stream and are joined back before the call returns (common.fork / common.join), so the harness's end
event waits for the last kernel on any of them.

What it should buy on an H100: each kernel takes as long as before (it is latency-bound), but 8 run side
by side on 8 x 16 = 128 SMs, so the call takes as long as the busiest stream's two sequences: ~1/8 of
the serial time plus the imbalance of the ragged lengths, ~5-7x faster (ceiling: the longest stream's
steps x ~0.5 µs). On a CPU run the kernels run in the Triton interpreter, in order: same output, no
speedup.

Timed with the default cuda_event clock, as the baseline. Work per call: as the baseline (common.Scans).
"""

from chapters.ch11.common import Scans


class Concurrent(Scans):
    streams = 8


def get_benchmark() -> Concurrent:
    return Concurrent()
