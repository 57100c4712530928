"""Ways to time one cold-L2 call, side by side with Nsight Compute, and the batch's per-call time by batch length.

For the selfcheck's GPU workloads this prints the median of ``samples`` samples (µs) of each way:

* ``differential`` — the cuda_event clock's cold sample: events around a replay of a graph [L2 flush, call]
  minus the median of recent replays of a graph [L2 flush] (bench.measure.gpu_clocks);
* ``graph_events`` — one replay of a graph [L2 flush, event, call, event], timed by the two events inside
  it (recorded as external events): no subtraction, no graph-launch cost between the events;
* ``marked_differential`` — as ``differential``, with an event recorded inside both graphs after the flush
  ([flush, event, call] minus [flush, event]): whether a call that cannot start its launch under the
  flush's tail reads what ncu reads of an isolated kernel;
* ``graph_call`` — events around a replay of a graph [call] after an L2 flush (the cuda_graph clock);
* ``eager`` — events around an eager call after an L2 flush, queued behind the spin kernel;

and ``ncu`` — Nsight Compute's ``gpu__time_duration`` of a cold call (bench.audit.truth), where ncu is on
the PATH. Then, for each workload, a graph of N back-to-back calls replayed: per-call time by N (the batch
truth takes ~4 ms of calls; the harness's batch another N), and one graph of ~4 ms of calls timed in several
regimes: replays back to back (the batch truth), each behind a spin kernel of 0.05, 0.2 or 1 ms (the
harness's batch sample), each after the host slept as long as a replay, and the harness's own batch.

Usage: ``python scripts/timing/cold_probe.py [samples] [--no-ncu]``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from bench.audit.truth import _graph_replay_ms, build, ncu_truth_ms  # noqa: E402
from bench.measure.gpu_clocks import CudaEventClock, capture_graph  # noqa: E402
from bench.measure.guard import BOUND  # noqa: E402

WORKLOADS = ("tiny_add", "scale_8mib", "scale_64mib")


def graph_events(clock: CudaEventClock, fn, dev: torch.device, samples: int) -> list[float]:
    """Events recorded inside the graph, right around the call, after the graph's own flush."""
    flush = clock._flush
    assert flush is not None
    start, end = (torch.cuda.Event(enable_timing=True, external=True) for _ in range(2))

    def body() -> None:
        flush()
        start.record()
        fn()
        end.record()

    replay = capture_graph(body, 1, dev)
    out = []
    for _ in range(samples + 3):
        flush()
        BOUND.spin(int(clock._spin_ms * clock._cycles_per_ms))
        replay()
        torch.cuda.synchronize(dev)
        out.append(start.elapsed_time(end))
        BOUND.sleep(out[-1] / 1e3)
    return out[3:]


def marked_differential(clock: CudaEventClock, fn, dev: torch.device, samples: int) -> list[float]:
    flush = clock._flush
    assert flush is not None
    marks = [torch.cuda.Event(external=True) for _ in range(2)]

    def with_call() -> None:
        flush()
        marks[0].record()
        fn()

    def without() -> None:
        flush()
        marks[1].record()

    both, alone = capture_graph(with_call, 1, dev), capture_graph(without, 1, dev)
    out, refs = [], []
    for _ in range(samples + 3):
        out.append(clock._span(both, flush=True))
        refs.append(clock._span(alone, flush=True))
        out[-1] -= statistics.median(refs[-9:])
    return out[3:]


def batch_regimes(clock: CudaEventClock, fn, dev: torch.device, per_call_ms: float) -> dict[str, float]:
    calls = max(10, min(4000, int(4.0 / max(per_call_ms, 1e-4))))
    replay = capture_graph(fn, calls, dev)

    def timed(before) -> float:
        times = []
        for _ in range(22):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            before()
            start.record()
            replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times[1:]) / calls * 1e3

    out = {f"calls={calls} back to back": timed(lambda: None)}
    for spin_ms in (0.05, 0.2, 1.0):
        out[f"behind a {spin_ms:g} ms spin"] = timed(lambda s=spin_ms: BOUND.spin(int(s * clock._cycles_per_ms)))
    out["after a sleep"] = timed(lambda: BOUND.sleep(calls * per_call_ms / 1e3))
    batch = clock.measure_batch(fn, per_call_ms)
    out[f"harness batch ({batch.calls} calls)"] = statistics.median(batch.samples_ms) * 1e3 if batch else float("nan")
    return out


def main() -> None:
    samples = int(next((a for a in sys.argv[1:] if a.isdigit()), "300"))
    use_ncu = "--no-ncu" not in sys.argv
    dev = torch.device("cuda", 0)
    print(f"device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}; {samples} samples per cell\n")
    print("| workload | differential | marked_differential | graph_events | graph_call | eager | ncu |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    batches, regimes = {}, {}
    for name in WORKLOADS:
        w = build(name)
        clock = CudaEventClock(dev)
        clock.warmup(w.fn, 20)
        diff = [clock.one(w.fn) for _ in range(samples)]
        eager = [clock.eager(w.fn) for _ in range(samples)]
        marked = marked_differential(clock, w.fn, dev, samples)
        ev = graph_events(clock, w.fn, dev, samples)
        replay = capture_graph(w.fn, 1, dev)
        call = [clock._span(replay, flush=True) for _ in range(samples)]
        ncu = ncu_truth_ms(name)[0] if use_ncu else None
        med = [statistics.median(s) * 1e3 for s in (diff, marked, ev, call, eager)]
        ncu_s = f"{ncu * 1e3:.2f}" if ncu else "—"
        print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in med) + f" | {ncu_s} |", flush=True)
        per_call = statistics.median(diff)
        batches[name] = {
            n: _graph_replay_ms(w.fn, n) / n * 1e3
            for n in sorted({10, 50, 100, max(10, int(4.0 / max(per_call, 1e-4))), 500, 1000, 2000})
        }
        regimes[name] = batch_regimes(clock, w.fn, dev, per_call)
    print("\nback-to-back calls in one graph, µs per call by calls per graph:\n")
    for name, by_n in batches.items():
        print(f"- {name}: " + ", ".join(f"{n}: {t:.3f}" for n, t in by_n.items()))
    print("\none graph of ~4 ms of calls, µs per call (median of 21 replays) by regime:\n")
    for name, by_regime in regimes.items():
        print(f"- {name}: " + ", ".join(f"{r}: {t:.3f}" for r, t in by_regime.items()))


if __name__ == "__main__":
    main()
