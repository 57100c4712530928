"""How the GPU's energy counter behaves, and what bench.measure.energy reads beside simpler ways of reading it.

    python scripts/timing/energy_probe.py [--seconds 2] [--repeats 3]

Three workloads, each a CUDA graph of back-to-back calls: an 8192³ bf16 matmul (compute), a 256 MiB fp32 scale
(memory), a 1 Ki-element add (launch-bound; the graph removes the launches). For each, energy per call:

* ``harness``: bench.measure.energy (counter steps, power × the window's time per call) over windows of 1, 2 and
  4 s, and ``--repeats`` windows of ``--seconds``: does the figure depend on the window, does it repeat;
* ``ends``: the counter read before and after a fixed run of calls, a synchronize before each read (what a script
  would do), over ~20, 100 and 500 ms, five times each: what reading at arbitrary times gives;
* ``power``: NVML's power reading (nvmlDeviceGetPowerUsage, the figure nvidia-smi prints) sampled every 10 ms over
  3 s of the calls, its median over the last 2 s × the time per call: a second reading of the same board.

Also the counter's step period and the board's power with the GPU idle. Prints Markdown. Reads only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _workloads(torch: Any) -> dict[str, tuple[Any, int]]:
    """name → (one call, calls per graph unit of ~5 ms)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    c = torch.empty_like(a)
    x = torch.randn(64 * 2**20, device="cuda", generator=g)
    y = torch.empty_like(x)
    s, t = torch.randn(1024, device="cuda", generator=g), torch.empty(1024, device="cuda")
    return {
        "matmul bf16 8192³": (lambda: torch.mm(a, b, out=c), 4),
        "scale fp32 256 MiB": (lambda: torch.mul(x, 2.0, out=y), 32),
        "add 1 Ki fp32": (lambda: torch.add(s, 1.0, out=t), 2000),
    }


def _steps(read: Any, seconds: float) -> tuple[float, list[float]]:
    """Poll the counter for ``seconds``: (mean power W over its steps, step periods ms)."""
    ticks, last, t0 = [], read(), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        value = read()
        if value != last:
            ticks.append((time.perf_counter(), value))
            last = value
    gaps = [1e3 * (b[0] - a[0]) for a, b in zip(ticks, ticks[1:], strict=False)]
    watts = (ticks[-1][1] - ticks[0][1]) / (ticks[-1][0] - ticks[0][0]) / 1e3 if len(ticks) > 1 else float("nan")
    return watts, gaps


def _ends(torch: Any, unit: Any, calls: int, per_call_ms: float, read: Any, window_ms: float) -> float:
    """Energy per call from counter reads at the ends of a fixed run (synchronized before each read)."""
    units = max(1, round(window_ms / (per_call_ms * calls)))
    torch.cuda.synchronize()
    e0 = read()
    for _ in range(units):
        unit()
    torch.cuda.synchronize()
    return (read() - e0) / (units * calls)


def _power(torch: Any, unit: Any, calls: int, handle: Any, pynvml: Any) -> tuple[float, float]:
    """(median NVML power W over the last 2 of 3 s of back-to-back units, time per call ms over them)."""
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            samples.append((time.perf_counter(), pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3))
            time.sleep(0.01)

    thread = threading.Thread(target=poll, daemon=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    thread.start()
    start.record()
    units = 0
    while time.perf_counter() - t0 < 3.0:
        unit()
        units += 1
        if units % 4 == 0:
            torch.cuda.synchronize()  # keeps the host within a few units of the device
    end.record()
    torch.cuda.synchronize()
    stop.set()
    thread.join()
    late = [w for t, w in samples if t - t0 >= 1.0]
    return statistics.median(late), start.elapsed_time(end) / (units * calls)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import pynvml
    import torch

    from bench.measure.energy import EnergyCounter, measure_energy
    from bench.measure.gpu_clocks import capture_graph
    from bench.measure.guard import BOUND

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device; torch.cuda.is_available() is False")
    BOUND.bind_torch()
    BOUND.bind_nvml()
    props = torch.cuda.get_device_properties(0)
    counter = EnergyCounter(0, str(getattr(props, "uuid", "")) or None)
    pynvml.nvmlInit()
    handle = counter._handle
    reads = []
    for _ in range(200):
        t = time.perf_counter()
        counter.read()
        reads.append(1e6 * (time.perf_counter() - t))
    idle_w, idle_gaps = _steps(counter.read, 1.0)
    print(f"# Energy counter on {props.name}\n")
    step = statistics.median(idle_gaps)
    print(f"Idle: {idle_w:.1f} W over the counter's steps in 1 s; step period median {step:.1f} ms "
          f"(min {min(idle_gaps):.1f}, max {max(idle_gaps):.1f}, {len(idle_gaps)} steps); one read of the counter "
          f"{statistics.median(reads):.0f} µs (median of 200, max {max(reads):.0f})\n")  # fmt: skip
    print("| workload | method | window | mJ per call (median) | spread (min–max) | W | ms per call |")
    print("|---|---|---|---:|---|---:|---:|")
    for name, (fn, calls) in _workloads(torch).items():
        unit = capture_graph(fn, calls, torch.device("cuda", 0))
        for _ in range(20):
            unit()
        torch.cuda.synchronize()

        def row(method: str, window: str, mj: list[float], watts: float, ms: float, name: str = name) -> None:
            spread = f"{min(mj):.4g}–{max(mj):.4g}" if len(mj) > 1 else "—"
            print(f"| {name} | {method} | {window} | {statistics.median(mj):.4g} | {spread} | {watts:.0f} | {ms:.4g} |")

        for seconds in (1.0, 2.0, 4.0):
            e = measure_energy(unit, calls, "graph", counter, seconds)
            row("harness", f"{seconds:g} s", e.samples_mj, statistics.median(e.power_w), e.per_call_ms)
        repeats = [measure_energy(unit, calls, "graph", counter, args.seconds) for _ in range(args.repeats)]
        medians = [statistics.median(r.samples_mj) for r in repeats]
        watts = statistics.median(p for r in repeats for p in r.power_w)
        row("harness, repeats", f"{args.repeats} x {args.seconds:g} s", medians, watts, repeats[0].per_call_ms)
        per_call = repeats[0].per_call_ms
        print(f"| {name} | counter step (busy) | — | — | — | — | {repeats[0].step_ms:.1f} ms |")
        for window_ms in (20.0, 100.0, 500.0):
            mj = [_ends(torch, unit, calls, per_call, counter.read, window_ms) for _ in range(5)]
            row("ends", f"{window_ms:g} ms", mj, statistics.median(mj) / per_call, per_call)
        watts, ms = _power(torch, unit, calls, handle, pynvml)
        row("power reading", "3 s", [watts * ms], watts, ms)


if __name__ == "__main__":
    main()
