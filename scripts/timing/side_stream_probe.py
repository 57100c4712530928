"""Which calls leave the device busy after their end event, and how a detector tells side streams from noise.

For a few calls (a plain op, an op with a host sync inside, many small kernels, a sort on the current stream,
the same sort on an unjoined side stream, and on a joined one) this prints, per way of taking a sample, the
device-wide synchronize's wait after the end event ("tail") beside a second synchronize with nothing left
("idle"), in µs, and how many samples the harness's rule (tail - idle > max(50 µs, 10 % of the span)) flags:

* ``spin``  — the cuda_event clock's eager sample: L2 flush, spin kernel, start, call, end;
* ``graph`` — the cold sample of a captured call: a replay of [flush, call] (the call's kernels in a graph);
* ``bare``  — no spin, no flush: synchronize, start, call, end on an idle device.

Usage: ``python scripts/timing/side_stream_probe.py [samples]``.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from bench.measure.gpu_clocks import CudaEventClock, capture_graph  # noqa: E402
from bench.measure.guard import BOUND  # noqa: E402

Fn = Callable[[], object]


def workloads(dev: torch.device) -> tuple[dict[str, Fn], torch.Tensor]:
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(1 << 20, generator=g, device=dev)
    w, b = torch.randn_like(x), torch.randn_like(x)
    out = torch.empty_like(x)
    big = torch.randn(32 << 20, generator=g, device=dev)
    side = torch.cuda.Stream(dev)

    def plain() -> None:
        torch.mul(x, 2.0, out=out)

    def item_inside() -> None:
        if not bool((x[1:] >= x[:-1]).all()):
            pass
        torch.addcmul(b, x, w, out=out)

    def many_kernels() -> None:
        for start in range(0, big.numel(), 1 << 20):
            chunk = big[start : start + (1 << 20)]
            for _ in range(8):
                chunk.mul_(0.5).add_(0.5)

    def sort_current() -> None:
        torch.addcmul(b, torch.sort(x).values, w, out=out)

    def sort_unjoined() -> None:
        with torch.cuda.stream(side):
            torch.addcmul(b, torch.sort(x).values, w, out=out)

    def sort_joined() -> None:
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            torch.addcmul(b, torch.sort(x).values, w, out=out)
        main.wait_stream(side)

    fns = {f.__name__: f for f in (plain, item_inside, many_kernels, sort_current, sort_unjoined, sort_joined)}
    return fns, out


def bare(fn: Fn, dev: torch.device) -> tuple[float, float, float]:
    start, end = BOUND.Event(enable_timing=True), BOUND.Event(enable_timing=True)
    BOUND.synchronize(dev)
    BOUND.record(start)
    fn()
    BOUND.record(end)
    BOUND.event_synchronize(end)
    t0 = BOUND.perf_counter()
    BOUND.synchronize(dev)
    t1 = BOUND.perf_counter()
    BOUND.synchronize(dev)
    t2 = BOUND.perf_counter()
    return BOUND.elapsed_time(start, end), (t1 - t0) * 1e3, (t2 - t1) * 1e3


def row(name: str, mode: str, spans: list[float], tails: list[float], idles: list[float]) -> str:
    flagged = sum(t - i > max(0.05, 0.1 * s) for s, t, i in zip(spans, tails, idles, strict=True))
    q = sorted(tails)
    return (
        f"| {name} | {mode} | {len(spans)} | {1e3 * statistics.median(spans):.1f} "
        f"| {1e3 * statistics.median(tails):.1f} "
        f"| {1e3 * q[int(0.9 * (len(q) - 1))]:.1f} | {1e3 * max(tails):.1f} | {1e3 * statistics.median(idles):.1f} "
        f"| {flagged} |"
    )


def main() -> None:
    if not torch.cuda.is_available():
        print("side_stream_probe: needs a CUDA device; torch.cuda.is_available() is False")
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    dev = torch.device("cuda", 0)
    BOUND.bind_torch()
    print(f"{torch.cuda.get_device_name(0)}, {n} samples per row\n")
    print("| call | sample | n | span median µs | tail median µs | tail p90 | tail max | idle median | flagged |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    fns, out = workloads(dev)
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        BOUND.synchronize(dev)
        clock = CudaEventClock(dev)
        for _ in range(10):  # the spin grows to cover the host's enqueue, as in warm-up
            clock._span(fn, flush=True)
        clock.tails_ms, clock.idle_sync_ms = [], []
        spans = [clock._span(fn, flush=True) for _ in range(n)]
        print(row(name, "spin", spans, clock.tails_ms, clock.idle_sync_ms), flush=True)
        try:
            flush = clock._flush
            assert flush is not None

            def with_call(f: Fn = fn, fl: Fn = flush) -> None:
                fl()
                f()

            replay = capture_graph(with_call, 1, dev)
            clock.tails_ms, clock.idle_sync_ms = [], []
            spans = [clock._span(replay, flush=True) for _ in range(n)]
            print(row(name, "graph", spans, clock.tails_ms, clock.idle_sync_ms), flush=True)
            out.fill_(float("nan"))  # does a replay of the captured call write the call's output?
            replay()
            BOUND.synchronize(dev)
            print(f"| {name} | graph replay writes the output: {not bool(torch.isnan(out).any())} |||||||", flush=True)
        except Exception as exc:  # a call that cannot be captured
            print(f"| {name} | graph | capture failed: {type(exc).__name__}: {str(exc)[:80]} |||||||", flush=True)
        BOUND.synchronize(dev)
        samples = [bare(fn, dev) for _ in range(n)]
        print(row(name, "bare", *map(list, zip(*samples, strict=True))), flush=True)


if __name__ == "__main__":
    main()
