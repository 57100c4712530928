"""Why is a 1024-element add not batched on the H200 host? (tests/bench/measure/test_clocks.py failed there)

The cuda_event clock batches a call whose fastest warm-up sample is under BATCH_BELOW_MS (5 µs); on the
H200 host the add's fastest of 10 warm-up samples was not (the H100 host: ~2 µs). This prints, per clock
setting, the ten warm-up samples (µs), the spin and the leaks, and what the clock then decided; plus the
add timed bare (events around one call, no spin, no flush) and inside one 1000-call graph.
Usage: ``python scripts/timing/tiny_add_probe.py``.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from bench.measure.gpu_clocks import CudaEventClock, capture_graph  # noqa: E402


def _event_ms(call: Callable[[], object], n: int) -> float:
    """Median over ``n`` of CUDA events around one ``call()`` on an idle device (no spin, no flush), ms."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return
    dev = torch.device("cuda", 0)
    a = torch.arange(1024, device=dev, dtype=torch.float32)
    b, out = a.flip(0).contiguous(), torch.empty_like(a)
    fn = lambda: torch.add(a, b, out=out)  # noqa: E731
    report: dict[str, object] = {"device": torch.cuda.get_device_name(dev)}
    for name, kwargs in {
        "default": {},
        "no_flush": {"flush_l2": False},
        "no_gap": {"sample_gap": 0.0},
        "spin_1ms": {"spin_ms": 1.0},
    }.items():
        clock = CudaEventClock(dev, **kwargs)
        samples = [1e3 * clock._one(fn) for _ in range(10)]
        spin, leaks = clock._spin_ms, clock.leaks
        clock.leaks = 0
        clock.warmup(fn, 10)
        report[name] = {
            "warmup_us": [round(s, 2) for s in samples],
            "spin_ms_after": spin,
            "leaks": leaks,
            "then_calls_per_sample": clock.calls_per_sample,
            "then_graph": clock._batch is not None,
        }
    report["bare_us_median"] = round(1e3 * _event_ms(fn, 20), 2)
    report["graph_1000_us_per_call"] = round(_event_ms(capture_graph(fn, 1000, dev), 5), 3)  # ms / 1000 calls
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
