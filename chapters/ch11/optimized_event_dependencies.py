"""The same dependency expressed with an event per layer: the side stream waits, the host does not.

The one idea: ``event.record()`` on the current stream after layer l, then ``side.wait_event(event)``: the
GPU holds the side stream's norm until layer l is done, and nothing else waits. The host queues all 32
layers and norms without stopping, the GPU runs the matmuls back to back, and each norm runs on the side
stream beside the next layer's matmul. The side stream is forked from the current stream and joined back
before the call returns (common.fork / common.join).

What it should buy on an H100: the ~50 µs idle gap per layer goes, and the norms hide behind the
matmuls: ~32 x 170 µs ≈ 5.5 ms instead of ~7 ms, about 1.2-1.4x (more on a slower host: the gap is the
host's). Its ceiling: the matmuls back to back at the fp32 rate. On a CPU run events do nothing and the
layers run in order: same output, no speedup.

Timed with the wall clock, as the baseline. Work per call: as the baseline (common.Monitored).
"""

from chapters.ch11.common import Monitored, on, record, wait


class EventHandoff(Monitored):
    def handoff(self, layer: int) -> None:
        record(self.ready[layer])  # on the current stream, after layer `layer`'s kernels
        with on(self.side[0]):
            wait(self.ready[layer])  # the side stream's later work waits for that point


def get_benchmark() -> EventHandoff:
    return EventHandoff()
