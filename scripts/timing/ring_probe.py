"""Where ch03 ring_buffer's time goes: its two halves alone, in turn and overlapped, and the overlap's knobs.

Runs the pair's own objects (chapters/ch03: ``Feed``, ``Serial``, ``Ring``) outside the harness at their
full size on the GPU (smoke size on a CPU) and prints the median wall time of one call (16 steps) in ms,
with the device synchronized on both sides, the rows in order and then in reverse order, for:

- ``decode only``: the producer's half (wait for the slot, gather, decode) for every step, on this thread;
- ``launch only``: the consumer's half (queue the copy, launch the layers) for every step;
- ``serial`` / ``ring``: the pair's baseline and optimized ``benchmark_fn``;
- ``ring, switch interval S``: the ring with ``sys.setswitchinterval(S)`` (CPython's GIL hand-off timeout,
  5 ms by default: how long a thread that wants the GIL waits before it asks the holder to drop it);
- ``ring, producer team N``: the ring with the producer's intra-op team of N threads;
- ``ring, scripted decode``: the ring whose producer decodes through one TorchScript call per step (run
  without the GIL: one hand-off per step instead of one per op);
- ``launch beside a decoding thread``: the launch half while another thread decodes without pause (what the
  launching thread suffers from the producer: GIL hand-offs and cores).

    python3 scripts/timing/ring_probe.py [--calls 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import chapters.ch03.optimized_ring_buffer as ring_module  # noqa: E402
from bench.define.context import context, synchronize  # noqa: E402
from chapters.ch03.baseline_ring_buffer import Serial  # noqa: E402
from chapters.ch03.common import host_cores  # noqa: E402
from chapters.ch03.optimized_ring_buffer import Ring  # noqa: E402


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


def with_switch_interval(fn: Callable[[], None], seconds: float) -> Callable[[], None]:
    def call() -> None:
        before = sys.getswitchinterval()
        sys.setswitchinterval(seconds)
        try:
            fn()
        finally:
            sys.setswitchinterval(before)

    return call


def with_team(fn: Callable[[], None], threads: int) -> Callable[[], None]:
    """``fn`` with the ring's producer team sized ``threads`` (its module's ``host_cores`` patched)."""

    def call() -> None:
        real = ring_module.host_cores
        ring_module.host_cores = lambda: list(range(threads + 1))
        try:
            fn()
        finally:
            ring_module.host_cores = real

    return call


@torch.jit.script
def scripted_decode(raw: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> None:
    torch.sub(raw.index_select(0, idx), 127.5, out=out)
    out.mul_(1 / 48)
    torch.tanh(out, out=out)


class ScriptedRing(Ring):
    def produce(self, step: int, slot: torch.Tensor, done: torch.cuda.Event | None) -> None:
        if done is not None:
            done.synchronize()
        scripted_decode(self.raw, self.idx[step], slot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    serial, ring, scripted = Serial(), Ring(), ScriptedRing()
    for obj in (serial, ring, scripted):
        obj.setup()
    cores = len(host_cores())
    decode_only, launch_only = halves(serial)
    rows: list[tuple[str, Callable[[], None]]] = [
        ("decode only", decode_only),
        ("launch only", launch_only),
        ("launch beside a decoding thread", beside_decoder(serial, launch_only)),
        ("serial (baseline)", serial.benchmark_fn),
        ("ring (optimized)", ring.benchmark_fn),
        ("ring, scripted decode", scripted.benchmark_fn),
    ]
    for s in (1e-4, 1e-5):
        rows.append((f"ring, switch interval {s * 1e6:g} us", with_switch_interval(ring.benchmark_fn, s)))
    rows.append(("serial, switch interval 10 us", with_switch_interval(serial.benchmark_fn, 1e-5)))
    rows.append(("serial, switch interval 5 ms (the default, set)", with_switch_interval(serial.benchmark_fn, 5e-3)))
    rows += [(f"ring, producer team {n}", with_team(ring.benchmark_fn, n)) for n in sorted({max(1, cores // 2), 4, 1})]
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
    expected = serial.out.clone()
    scripted.benchmark_fn()
    print(f"\nscripted ring's output equal to the serial one: {torch.equal(scripted.out.cpu(), expected.cpu())}")


if __name__ == "__main__":
    main()
