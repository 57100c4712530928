"""The harness's own CudaEventClock on a 1024-element add, with its internals printed (spin calibration,
spin length, batch size, leaks), to compare with tiny_probe.py's hand-written sample pattern.

    python scripts/timing/clock_probe.py      (no perflab install needed: bench/__init__ is bypassed)
"""

from __future__ import annotations

import statistics
import sys
import types
from pathlib import Path

sys.modules["bench"] = types.ModuleType("bench")
sys.modules["bench"].__path__ = [str(Path(__file__).resolve().parents[2] / "bench")]  # type: ignore[attr-defined]

import torch  # noqa: E402

from bench.measure.gpu_clocks import CudaEventClock  # noqa: E402
from bench.measure.stopping import StopRule  # noqa: E402


def main() -> None:
    a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    out = torch.empty_like(a)
    fn = lambda: torch.add(a, b, out=out)  # noqa: E731
    for warm_first in (False, True):
        if warm_first:  # calibrate the spin with the GPU already clocked up
            x = torch.randn(2**26, device="cuda")
            for _ in range(50):
                x.mul_(1.0)
        clock = CudaEventClock(torch.device("cuda", 0))
        clock.first_call(fn)
        clock.warmup(fn, 4)
        m = clock.measure(fn, 30, StopRule())
        print(f"warm_first={warm_first}: median {statistics.median(m.samples_ms) * 1e3:.3f} µs per add; "
              f"cycles/ms {clock._cycles_per_ms:.0f}; spin {clock._spin_ms} ms; calls/sample {clock.calls_per_sample}; "
              f"graph {clock._batch is not None}; notes {clock.notes}")  # fmt: skip


if __name__ == "__main__":
    main()
