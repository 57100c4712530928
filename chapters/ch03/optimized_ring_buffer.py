"""A ring of 4 page-locked slots in shared memory, filled ahead by a producer process while this one launches.

The one idea: produce the batches somewhere else than on the launching thread, ahead of need, into a ring
of page-locked slots, so that decoding step k + 2's batch overlaps launching step k. The producer is a
process of its own (started once, in setup; spawned, so that its intra-op team is its own): a thread
would share the launching thread's GIL, and each op either of them starts hands the GIL over (a thread
wake-up each time): on the H100 host launching beside a decoding thread took 15-50 % longer than alone,
and a thread-fed ring read 0.93x [0.86, 1.00] and 1.13x [1.02, 1.22] in two runs
(scripts/timing/ring_probe.py). The slots are shared memory, page-locked here with cudaHostRegister, so
the copies out of them are asynchronous as the baseline's are. A slot is ordered refilled once the copy
out of it is done (its CUDA event), a step after it was queued. Same batches, same order, same layers:
bitwise-equal outputs.

Expected on the H100 host: per step max(decode, launch) instead of their sum, each ~0.25-0.3 ms: up to
~2x less the orders' pipe round trips (tens of us a step). On a CPU-only machine the slots are ordinary
shared memory, the copies memcpys, and the producer shares the CPU with the layers.

Work per call: as the baseline (common.Feed). Timed with the wall clock.
"""

import contextlib
import multiprocessing
from multiprocessing.connection import wait
from typing import NoReturn

import torch

from chapters.ch03.common import Feed, host_cores, produce_forever

SLOTS = 4


class ProcessRing(Feed):
    made = (*Feed.made, "conn", "worker")

    def prepare(self, batch: int, width: int) -> None:
        cuda = self.device.type == "cuda"
        self.raw.share_memory_()
        self.idx.share_memory_()
        slots = [torch.empty(batch, width).share_memory_() for _ in range(SLOTS)]
        for slot in slots if cuda else ():
            code = torch.cuda.cudart().cudaHostRegister(slot.data_ptr(), slot.numel() * slot.element_size(), 0)
            if code != 0 or not slot.is_pinned():
                raise RuntimeError(f"cudaHostRegister of a {slot.numel() * 4} B shared slot failed (error {code})")
        self.slots = [(slot, torch.cuda.Event() if cuda else None) for slot in slots]
        spawn = multiprocessing.get_context("spawn")
        self.conn, theirs = spawn.Pipe()
        threads = max(1, len(host_cores()) - 1)  # one core left to the launching thread
        self.worker = spawn.Process(target=produce_forever, args=(self.raw, self.idx, slots, threads, theirs),
                                    daemon=True)  # fmt: skip
        self.worker.start()
        theirs.close()

    def order(self, step: int, k: int) -> None:
        """Ask the producer to fill slot ``k`` with ``step``'s batch; raises if it has ended."""
        try:
            self.conn.send((step, k))
        except OSError:  # its end of the pipe is closed
            self.ended()

    def filled(self) -> int:
        """The next filled slot from the producer; raises if it failed or ended."""
        if not self.conn.poll():
            wait([self.conn, self.worker.sentinel])
            if not self.conn.poll():
                self.ended()
        try:
            k = self.conn.recv()
        except (EOFError, OSError):  # readable because its end closed (reset when orders were left unread)
            self.ended()
        if isinstance(k, str):
            raise RuntimeError(f"the producer process failed: {k}")
        return k

    def ended(self) -> NoReturn:
        self.worker.join(timeout=5)
        raise RuntimeError(f"the producer process ended (exit code {self.worker.exitcode})")

    def benchmark_fn(self) -> None:
        steps = self.idx.shape[0]
        for step in range(min(SLOTS, steps)):
            self.order(step, step % SLOTS)
        for step in range(steps):
            k = self.filled()
            self.consume(step, *self.slots[k])
            refill = step - 1 + SLOTS  # the previous step's slot: its copy was queued a step ago
            if step >= 1 and refill < steps:
                _, done = self.slots[(step - 1) % SLOTS]
                if done is not None:
                    done.synchronize()
                self.order(refill, (step - 1) % SLOTS)

    def teardown(self) -> None:
        with contextlib.suppress(OSError):  # a producer that has ended has closed its end
            self.conn.send(None)
        self.worker.join(timeout=30)
        if self.worker.is_alive():
            self.worker.kill()
        for slot, _ in self.slots if self.device.type == "cuda" else ():
            torch.cuda.cudart().cudaHostUnregister(slot.data_ptr())
        super().teardown()


def get_benchmark() -> Feed:
    return ProcessRing()
