"""Where ch03 ring_buffer's time goes: its two halves alone, in turn, and overlapped by a thread or a process.

Runs the pair's own objects (chapters/ch03: ``Feed``, ``Serial``, ``ProcessRing``) outside the harness at
their full size on the GPU (smoke size on a CPU) and prints the median wall time of one call (16 steps) in
ms, with the device synchronized on both sides, the rows in order and then in reverse order, for:

- ``decode only``: the producer's half (wait for the slot, gather, decode) for every step, on this thread;
- ``launch only``: the consumer's half (queue the copy, launch the layers) for every step;
- ``launch beside a decoding thread``: the launch half while another thread of this process decodes
  without pause (what a producer thread costs the launching one: GIL hand-offs and cores);
- ``serial``: the pair's baseline;
- ``thread ring``: a ring of 3 page-locked slots filled by a producer thread (``ThreadRing`` below, the
  design the pair's optimized side replaced);
- ``process ring``: the pair's optimized side (a producer process).

    python3 scripts/timing/ring_probe.py [--calls 30]
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.define.context import context, synchronize  # noqa: E402
from chapters.ch03.baseline_ring_buffer import Serial  # noqa: E402
from chapters.ch03.common import Feed, host_cores  # noqa: E402
from chapters.ch03.optimized_ring_buffer import ProcessRing  # noqa: E402


class ThreadRing(Feed):
    """A ring of 3 page-locked slots, filled ahead by a producer thread of this process (intra-op team: the
    cores less one) while this thread launches; the producer waits on a slot's CUDA event before refilling."""

    def prepare(self, batch: int, width: int) -> None:
        self.slots = [self.slot(batch, width) for _ in range(3)]

    def benchmark_fn(self) -> None:
        steps = self.idx.shape[0]
        free: queue.SimpleQueue[int] = queue.SimpleQueue()
        filled: queue.SimpleQueue[int | BaseException] = queue.SimpleQueue()
        for k in range(len(self.slots)):
            free.put(k)

        def producer() -> None:
            try:
                torch.set_num_threads(max(1, len(host_cores()) - 1))
                for step in range(steps):
                    k = free.get()
                    self.produce(step, *self.slots[k])
                    filled.put(k)
            except BaseException as exc:
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


def timed(fn: Callable[[], None], calls: int) -> float:
    """Median ms of ``calls`` calls of ``fn`` after 3 unrecorded ones, the device idle at each start and end."""
    device = context().device
    times = []
    for i in range(calls + 3):
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def halves(obj: Serial) -> tuple[Callable[[], None], Callable[[], None]]:
    slot, done = obj.slots[0]
    steps = range(obj.idx.shape[0])

    def decode_only() -> None:
        for step in steps:
            obj.produce(step, slot, done)

    def launch_only() -> None:
        for step in steps:
            obj.consume(step, slot, done)

    return decode_only, launch_only


def beside_decoder(obj: Serial, launch_only: Callable[[], None]) -> Callable[[], None]:
    """``launch_only`` while a second thread decodes into its own buffer until told to stop."""
    scratch = torch.empty_like(obj.slots[0][0])

    def call() -> None:
        stop = threading.Event()

        def decoder() -> None:
            torch.set_num_threads(max(1, len(host_cores()) - 1))
            step = 0
            while not stop.is_set():
                obj.produce(step % obj.idx.shape[0], scratch, None)
                step += 1

        thread = threading.Thread(target=decoder, daemon=True)
        thread.start()
        try:
            launch_only()
        finally:
            stop.set()
            thread.join()

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    serial, threaded, process = Serial(), ThreadRing(), ProcessRing()
    for obj in (serial, threaded, process):
        obj.setup()
    cores = len(host_cores())
    decode_only, launch_only = halves(serial)
    rows: list[tuple[str, Callable[[], None]]] = [
        ("decode only", decode_only),
        ("launch only", launch_only),
        ("launch beside a decoding thread", beside_decoder(serial, launch_only)),
        ("serial (the baseline)", serial.benchmark_fn),
        ("thread ring", threaded.benchmark_fn),
        ("process ring (the optimized side)", process.benchmark_fn),
    ]
    device = context().device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU"
    print(f"ch03 ring_buffer's parts on {name}, {cores} cores, {args.calls} calls a row (median ms per call):")
    print("the rows in order, then again in reverse order (what a row leaves behind shows as a difference)\n")
    forward = [timed(fn, args.calls) for _, fn in rows]
    backward = [timed(fn, args.calls) for _, fn in reversed(rows)][::-1]
    print("| what | in order | reversed |")
    print("|---|---:|---:|")
    for (label, _), a, b in zip(rows, forward, backward, strict=True):
        print(f"| {label} | {a:.2f} | {b:.2f} |")
    serial.benchmark_fn()
    expected = serial.out.cpu()
    for label, obj in (("thread ring", threaded), ("process ring", process)):
        obj.benchmark_fn()
        print(f"\n{label}'s output equal to the serial one: {torch.equal(obj.out.cpu(), expected)}")
    process.teardown()


if __name__ == "__main__":
    main()
