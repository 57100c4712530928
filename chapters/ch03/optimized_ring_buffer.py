"""A ring of 3 page-locked buffers, filled ahead by a producer thread while the main thread launches.

The one idea: decode on a thread of its own, into a ring of page-locked slots, so that producing step
k + 1's batch overlaps launching step k. The main thread takes filled slots in order, queues their copy
and the layers, and hands the slot back; the producer waits on the slot's CUDA event (its copy has left
it) before refilling it. torch's decode kernels release the GIL, so the two threads run at once. The
producer's intra-op team is one core short of the machine: the launching thread keeps a core (a team
as large as the machine beside a busy thread stalls at its barriers: see num_threads). Same batches,
same order, same layers: bitwise-equal outputs.

Expected on the H100 host: per step max(decode, launch) instead of their sum: up to 2x with halves of
~0.25 ms each, less the threads' hand-offs of the GIL between ops (a thread wake-up each time: launching
beside a decoding thread took 13 % longer than alone on the H100 host, scripts/timing/ring_probe.py).
The overlap hides only the shorter half: with 64 launches a step (4x the decode) the ring could save at
most a fifth of the call and read 1.09x; with 256 it read 0.79-0.88x. On a CPU-only machine the two
threads share the CPU with the layers' own threads.

Work per call: as the baseline (common.Feed). Timed with the wall clock.
"""

import queue
import threading

import torch

from chapters.ch03.common import Feed, host_cores

SLOTS = 3


class Ring(Feed):
    def prepare(self, batch: int, width: int) -> None:
        self.slots = [self.slot(batch, width) for _ in range(SLOTS)]

    def benchmark_fn(self) -> None:
        steps = self.idx.shape[0]
        free: queue.SimpleQueue[int] = queue.SimpleQueue()
        filled: queue.SimpleQueue[int | BaseException] = queue.SimpleQueue()
        for k in range(SLOTS):
            free.put(k)

        def producer() -> None:
            try:
                torch.set_num_threads(max(1, len(host_cores()) - 1))  # this thread's team only
                for step in range(steps):
                    k = free.get()
                    self.produce(step, *self.slots[k])
                    filled.put(k)
            except BaseException as exc:  # handed to the main thread, which raises it
                filled.put(exc)

        thread = threading.Thread(target=producer, daemon=True)
        thread.start()
        try:
            for step in range(steps):
                k = filled.get()
                if isinstance(k, BaseException):
                    raise k
                self.consume(step, *self.slots[k])
                free.put(k)
        finally:
            thread.join()


def get_benchmark() -> Feed:
    return Ring()
