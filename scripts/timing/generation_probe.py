"""TTFT and TPOT as perflab reports them, against an independent measurement of the same engine.

The independent side is a plain loop over the benchmark's own protocol (``start_generation``,
``generate_step``) with CUDA events around every step (``perf_counter`` with the device synchronized on a
CPU) and nothing of the harness but the seed: per request, its first token's time is the end of the step
that emitted it (TTFT, every request arriving at 0) and TPOT is (last - first) / (tokens - 1); medians over
the requests of ``--generations`` generations. The harness's side is ``perflab run`` on the same file, in
its own child. Both sides use the benchmark's full size on a GPU. Request sets with later arrivals are
refused (the plain loop has no clock that jumps to an arrival).

    python3 scripts/timing/generation_probe.py chapters/ch15/optimized_kv_cache.py [--generations 5]

``--variance N``: instead, why one generation's span varies. N rounds, each one generation per condition of the
interpreter's garbage collector (in a rotating order): ``default``; ``frozen`` (``gc.collect(); gc.freeze()``
before it: the set-up's objects out of every later collection); ``disabled`` (collected, then ``gc.disable()``
for the generation, as ``timeit`` does). Per condition: the spans' median, coefficient of variation and range,
the collector's own time per generation (``gc.callbacks``), full collections, and the process's CPU time over
its wall (near 1: the host's work, not the GPU, sets the span).

``--drift S``: where a generation's span drifts from. Generations back to back for S seconds, each followed by two
fixed references: a pure-Python loop on the host (its time moves with the host CPU's speed) and a 4096² fp32
matmul on the GPU (CUDA events: moves with the GPU's clocks); beside them the host's steal time (/proc/stat: the
hypervisor running other guests on this VM's CPUs), the SM clock (NVML) and the CPU the process ran on. A row per
generation, then how far each moved (max / min) and its correlation with the span.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench import BenchmarkConfig, run_suite  # noqa: E402
from bench.define.context import make_context, set_context  # noqa: E402
from bench.define.discovery import Example  # noqa: E402
from bench.define.protocol import load_benchmark  # noqa: E402
from bench.define.result import VariantSpec  # noqa: E402


def _steps(obj: object, device: torch.device) -> list[tuple[float, dict[int, int]]]:
    """One generation: each step's end time (ms since the first step began) and the tokens it emitted."""
    obj.start_generation()  # type: ignore[attr-defined]
    out: list[tuple[float, dict[int, int]]] = []
    now = 0.0
    while True:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            emitted = obj.generate_step(now)  # type: ignore[attr-defined]
            end.record()
            end.synchronize()
            now += start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            emitted = obj.generate_step(now)  # type: ignore[attr-defined]
            now += (time.perf_counter() - t0) * 1e3
        if emitted is None:
            return out
        counts = dict(emitted) if hasattr(emitted, "items") else dict(enumerate(emitted))
        out.append((now, {i: int(c) for i, c in counts.items() if int(c) > 0}))


def _loaded(path: Path) -> tuple[object, torch.device]:
    config = BenchmarkConfig()
    ctx = make_context(config)
    set_context(ctx)
    torch.manual_seed(config.seed)
    obj = load_benchmark(path)
    obj.setup()
    return obj, ctx.device


def independent(path: Path, generations: int) -> tuple[float, float]:
    obj, device = _loaded(path)
    requests = obj.get_requests()  # type: ignore[attr-defined]
    arrivals = [float(r["arrival_ms"] if isinstance(r, dict) else getattr(r, "arrival_ms", 0.0)) for r in requests]
    if any(a > 0 for a in arrivals):
        raise SystemExit(f"{path}: requests arrive after 0 ms; this probe times request sets that arrive at once")
    _steps(obj, device)  # warm-up: allocator, kernels, graphs
    ttft: list[float] = []
    tpot: list[float] = []
    for _ in range(generations):
        first: dict[int, float] = {}
        last: dict[int, float] = {}
        tokens: dict[int, int] = {}
        for t, emitted in _steps(obj, device):
            for i, c in emitted.items():
                first.setdefault(i, t)
                last[i] = t
                tokens[i] = tokens.get(i, 0) + c
        ttft += list(first.values())
        tpot += [(last[i] - first[i]) / (tokens[i] - 1) for i in first if tokens[i] > 1]
    obj.teardown()
    set_context(None)
    return statistics.median(ttft), statistics.median(tpot)


GC_MODES = ("default", "frozen", "disabled")


def variance(path: Path, rounds: int) -> None:
    obj, device = _loaded(path)
    for _ in range(2):  # warm-up: allocator, kernels, graphs
        _steps(obj, device)
    clock = {"t0": 0.0, "s": 0.0, "full": 0}

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            clock["t0"] = time.perf_counter()
        else:
            clock["s"] += time.perf_counter() - clock["t0"]
            clock["full"] += info["generation"] == 2

    gc.callbacks.append(on_gc)
    rows: dict[str, list[tuple[float, float, int, float]]] = {m: [] for m in GC_MODES}
    for r in range(rounds):
        for mode in GC_MODES[r % 3 :] + GC_MODES[: r % 3]:
            if mode != "default":
                gc.collect()
                gc.freeze() if mode == "frozen" else gc.disable()
            clock.update(s=0.0, full=0)
            c0, w0 = time.process_time(), time.perf_counter()
            span = _steps(obj, device)[-1][0]
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            gc.enable()
            gc.unfreeze()
            rows[mode].append((span, clock["s"] * 1e3, clock["full"], cpu / wall))
    gc.callbacks.remove(on_gc)
    obj.teardown()  # type: ignore[attr-defined]
    set_context(None)
    print(f"{path} on {torch.cuda.get_device_name(0) if device.type == 'cuda' else 'the CPU'}, {rounds} rounds\n")
    print("| gc | n | span median ms | CV % | min ms | max ms | gc ms / generation | full collections | CPU / wall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode, got in rows.items():
        spans = [g[0] for g in got]
        cv = statistics.stdev(spans) / statistics.fmean(spans) * 100 if len(spans) > 1 else float("nan")
        print(
            f"| {mode} | {len(spans)} | {statistics.median(spans):.1f} | {cv:.1f} | {min(spans):.1f} | {max(spans):.1f}"
            f" | {statistics.median(g[1] for g in got):.2f} | {sum(g[2] for g in got)}"
            f" | {statistics.median(g[3] for g in got):.2f} |"
        )


def _cpu_times() -> tuple[int, int]:
    """(steal, total) jiffies of the host's CPUs so far (/proc/stat; zeros where there is none)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def _on_cpu() -> int:
    try:
        return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def _python_loop_ms() -> float:
    t0 = time.perf_counter()
    total = 0
    for i in range(300_000):
        total += i * i
    return (time.perf_counter() - t0) * 1e3


def _matmul_ms(a: torch.Tensor) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(5):
        a @ a
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 5


def drift(path: Path, seconds: float) -> None:
    obj, device = _loaded(path)
    for _ in range(2):
        _steps(obj, device)
    a = torch.randn(4096, 4096, device=device) if device.type == "cuda" else None
    sm_clock = lambda: float("nan")  # noqa: E731
    if a is not None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
            sm_clock = lambda: float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))  # noqa: E731
        except Exception:  # noqa: BLE001 - no NVML: the column reads nan
            pass
    rows: list[tuple[float, ...]] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        s0 = _cpu_times()
        span = _steps(obj, device)[-1][0]
        s1 = _cpu_times()
        steal = 100.0 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
        gpu = _matmul_ms(a) if a is not None else float("nan")
        rows.append((time.perf_counter() - t0, span, _python_loop_ms(), gpu, steal, sm_clock(), float(_on_cpu())))
    obj.teardown()  # type: ignore[attr-defined]
    set_context(None)
    print(f"{path} on {torch.cuda.get_device_name(0) if a is not None else 'the CPU'}, {len(rows)} generations\n")
    print("| t s | span ms | host loop ms | GPU matmul ms | steal % | SM MHz | CPU |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for t, span, host, gpu, steal, clock, cpu in rows:
        print(f"| {t:.1f} | {span:.1f} | {host:.2f} | {gpu:.3f} | {steal:.1f} | {clock:.0f} | {cpu:.0f} |")
    spans = [r[1] for r in rows]
    print("\n| reference | max / min | correlation with the span |")
    print("|---|---:|---:|")
    for i, name in ((1, "span"), (2, "host loop"), (3, "GPU matmul")):
        col = [r[i] for r in rows]
        if any(math.isnan(x) for x in col):
            continue
        spread = max(col) / min(col) if min(col) > 0 else float("nan")
        corr = statistics.correlation(spans, col) if len(rows) > 2 and statistics.pstdev(col) > 0 else float("nan")
        print(f"| {name} | {spread:.3f} | {corr:.2f} |")


def harness(path: Path) -> tuple[float, float]:
    spec = VariantSpec(chapter=path.parent.name, example="probe", variant="baseline", path=str(path))
    with tempfile.TemporaryDirectory() as wd:
        suite = run_suite([Example(path.parent.name, "probe", spec, [])], workdir=wd)
    (result,) = suite.variants
    gen = result.generation
    if result.status != "ok" or gen is None or gen.tpot_ms is None:
        raise SystemExit(f"{path}: the harness's run ended {result.status}: {result.error}")
    return gen.ttft_ms["median"], gen.tpot_ms["median"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a token-generating benchmark file")
    parser.add_argument("--generations", type=int, default=5)
    parser.add_argument("--variance", type=int, default=0, metavar="N", help="N rounds of the GC conditions instead")
    parser.add_argument("--drift", type=float, default=0.0, metavar="S", help="S seconds of generations and references")
    args = parser.parse_args()
    args.path = args.path.resolve()
    if args.drift:
        drift(args.path, args.drift)
        return
    if args.variance:
        variance(args.path, args.variance)
        return
    ttft_i, tpot_i = independent(args.path, args.generations)
    ttft_h, tpot_h = harness(args.path)
    print(f"{args.path} on {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'the CPU'}\n")
    print("| metric | perflab ms | independent ms | perflab / independent |")
    print("|---|---:|---:|---:|")
    for name, h, i in (("TTFT median", ttft_h, ttft_i), ("TPOT median", tpot_h, tpot_i)):
        print(f"| {name} | {h:.3f} | {i:.3f} | {h / i:.3f} |")


if __name__ == "__main__":
    main()
