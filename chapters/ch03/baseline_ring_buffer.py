"""Each step's batch produced on the main thread, between launching one step and the next.

A training-like loop: every step needs a batch decoded on the host (gather 2048 rows of uint8 pixels,
centre, scale, squash: common.decode) and runs 8 small eager layers on the device (16 launches). The
main thread does both in turn: while it decodes it launches nothing, and the device, done with the
last step's short kernels, idles; while it launches, nothing is decoded. The batch goes through one
page-locked buffer (so page-locking is not what differs), its copy queued; the next decode waits for
that copy to leave the buffer.

Expected on the H100 host: per step ~0.25 ms of decoding (all cores) + ~0.25 ms of launching 16 kernels
(~16 us each, measured by scripts/timing/ring_probe.py: a call's decoding alone 3.96 ms, 64 launches a
step 16.55 ms) whose device time hides behind the next decode: ~0.5 ms per step, ~8 ms per call. The
model's depth is chosen so that the two halves take about as long: overlap can at best hide the shorter.
On a CPU-only machine the layers run on the same CPU, in turn with the decoding.

Work per call (both sides): 16 steps of 2048 x 512 decoded values and 8 layers (common.Feed).
Timed with the wall clock.
"""

from chapters.ch03.common import Feed


class Serial(Feed):
    def prepare(self, batch: int, width: int) -> None:
        self.slots = [self.slot(batch, width)]

    def benchmark_fn(self) -> None:
        slot, done = self.slots[0]
        for step in range(self.idx.shape[0]):
            self.produce(step, slot, done)
            self.consume(step, slot, done)


def get_benchmark() -> Feed:
    return Serial()
