"""A pair whose benefit is memory (bench.measure.memory): its ratio and interval come from the per-call peaks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.define.result import Memory
from bench.errors import ProtocolError
from bench.measure.compare import compare
from bench.measure.memory import declared_metric
from tests.bench.measure.test_compare import ref, variant


def pair(tmp_path: Path, base: list[float], opt: list[float], metric: str = "peak_memory",
         base_metric: str | None = "peak_memory") -> tuple:  # fmt: skip
    out = ref()
    b = variant(tmp_path, "baseline", [out], median_ms=1.0)
    o = variant(tmp_path, "optimized", [out.clone()], median_ms=1.5)  # slower: time is not the point
    b.memory = Memory(device="cpu", peak_mb=1.0, metric=base_metric, call_peaks_mb=base)
    o.memory = Memory(device="cpu", peak_mb=1.0, metric=metric, call_peaks_mb=opt)
    return b, o


def test_equal_readings_give_an_exact_ratio(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, [300.0] * 5, [100.0] * 5))
    assert c.speedup_metric == "peak_memory" and c.status == "ok"
    assert c.speedup == pytest.approx(3.0) and c.speedup_ci_low == c.speedup_ci_high == pytest.approx(3.0)
    assert c.significance == "faster"  # on its metric: needs less
    assert c.baseline_median_ms < c.optimized_median_ms  # the time is kept, and here it got worse


def test_spread_readings_give_an_interval_around_the_ratio(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, [300.0, 310.0, 290.0, 305.0, 300.0], [150.0, 150.0, 160.0, 140.0, 150.0]))
    assert c.speedup == pytest.approx(2.0)
    assert c.speedup_ci_low < 2.0 < c.speedup_ci_high and c.speedup_ci_low > 1.0


def test_same_peak_is_no_difference(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, [100.0] * 5, [100.0] * 5, metric="peak_reserved", base_metric="peak_reserved"))
    assert c.speedup == 1.0 and c.significance == "no significant difference"


def test_no_readings_no_ratio_but_the_metric_stays(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, [], []))  # a CPU: peak RSS cannot be reset
    assert c.speedup_metric == "peak_memory" and c.speedup is None and c.significance is None
    assert c.status == "ok"


def test_baseline_without_the_metric_gives_no_ratio(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, [300.0] * 5, [100.0] * 5, base_metric=None))
    assert c.speedup is None and c.speedup_metric == "peak_memory"


def test_readings_logged_as_their_median(tmp_path: Path) -> None:
    from bench.record.contract import variant_metrics

    b, _ = pair(tmp_path, [300.0, 310.0, 290.0, 305.0, 300.0], [100.0] * 5)
    assert variant_metrics(b)["mem_call_peak_mb"] == 300.0


def test_declared_metric_rejects_unknown_names() -> None:
    class Bad:
        def speedup_metric(self) -> str:
            return "memory"

    with pytest.raises(ProtocolError, match="'memory'.*accepted.*'peak_memory'"):
        declared_metric(Bad())
    assert declared_metric(object()) == "time"


BENCH = '''
import torch
from bench import context

class Peak:
    def setup(self):
        self.x = torch.randn(2**20, device=context().device)  # 4 MiB
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        parts = [self.x * i for i in range(8)]  # 32 MiB alive at once, then the stack's 32 MiB
        self.out.copy_(torch.stack(parts).sum(0))

    def teardown(self):
        del self.x, self.out

    def get_output(self):
        return self.out

    def speedup_metric(self):
        return METRIC

def get_benchmark():
    return Peak()
'''


def run(tmp_path: Path, device: str, metric: str = "peak_memory"):
    from bench.define.result import VariantSpec
    from bench.isolate.runner import run_variant

    path = tmp_path / "ch98" / "baseline_peak.py"
    path.parent.mkdir(parents=True)
    path.write_text(BENCH.replace("METRIC", repr(metric)))
    spec = VariantSpec(chapter="ch98", example="peak", variant="baseline", path=str(path))
    return run_variant(spec, tmp_path / "wd", cli_layer={"device": device, "iterations": 3, "warmup": 1})


def test_cpu_run_keeps_the_metric_without_readings(tmp_path: Path) -> None:
    r = run(tmp_path, "cpu")
    assert r.status == "ok", r.error
    assert r.memory.metric == "peak_memory" and r.memory.call_peaks_mb == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: peak readings are CUDA's")
def test_cuda_readings_repeat_exactly(tmp_path: Path) -> None:
    r = run(tmp_path, "cuda")
    assert r.status == "ok", r.error
    peaks = r.memory.call_peaks_mb
    assert len(peaks) == 5 and len(set(peaks)) == 1, peaks
    assert peaks[0] >= 4 + 4 + 32 + 32  # input, output, the parts and their stack held together
