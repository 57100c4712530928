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


def test_a_small_exact_saving_is_a_verdict_the_noise_threshold_is_a_clocks(tmp_path: Path) -> None:
    """0.4 % less memory in every call is what the pair changes, not process-to-process noise: "faster" (needs
    less) under the default ±1 % noise threshold, which only a time's verdict uses."""
    c = compare(*pair(tmp_path, [100.4] * 5, [100.0] * 5))
    assert c.speedup_ci_low == pytest.approx(1.004) and c.significance == "faster" and c.noise_threshold == 0.0


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


BENCH = """
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
"""


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


# --- several ranks: each reads its own allocator, the variant's reading is the most any rank held ----------------


def rank_memory(peak: float, calls: list[float], **more: float) -> dict:
    return {"device": "cuda:0", "peak_mb": peak, "metric": "peak_memory", "call_peaks_mb": calls, **more}


def test_over_ranks_takes_each_reading_from_the_rank_that_held_most() -> None:
    from bench.measure.memory import over_ranks

    merged = over_ranks([
        rank_memory(500.0, [400.0, 410.0, 400.0], allocated_mb=50.0, reserved_mb=600.0, harness_mb=0.0),
        rank_memory(520.0, [405.0, 401.0, 402.0], allocated_mb=40.0, reserved_mb=640.0, harness_mb=0.0),
    ])  # fmt: skip
    assert merged["call_peaks_mb"] == [405.0, 410.0, 402.0]  # call by call, the larger
    assert merged["rank_call_peaks_mb"] == [[400.0, 410.0, 400.0], [405.0, 401.0, 402.0]]
    assert merged["call_peak_rank"] == 1  # medians 400 and 402
    assert (merged["peak_mb"], merged["rank_peak_mb"], merged["peak_rank"]) == (520.0, [500.0, 520.0], 1)
    assert (merged["allocated_mb"], merged["reserved_mb"]) == (50.0, 640.0)  # each size on its own
    assert merged["device"] == "cuda:0" and merged["metric"] == "peak_memory"


def test_over_ranks_on_a_cpu_keeps_every_ranks_peak_and_no_call_readings() -> None:
    from bench.measure.memory import over_ranks

    ranks = [{"device": "cpu", "peak_mb": mb, "rss_peak_mb": mb, "metric": "peak_memory"} for mb in (300, 280, 310)]
    merged = over_ranks(ranks)
    assert (merged["peak_mb"], merged["rss_peak_mb"], merged["peak_rank"]) == (310, 310, 2)
    assert "call_peaks_mb" not in merged and "call_peak_rank" not in merged
    Memory(**merged)  # what rank 0 sends is a result's Memory


def test_over_ranks_refuses_ranks_that_took_different_counts() -> None:
    from bench.measure.memory import over_ranks

    with pytest.raises(ValueError, match=r"different numbers of call peaks: \[3, 2\]"):
        over_ranks([rank_memory(1.0, [1.0, 1.0, 1.0]), rank_memory(1.0, [1.0, 1.0])])


def test_a_pair_of_ranks_is_compared_on_its_fullest_rank(tmp_path: Path) -> None:
    """Rank 1 of the optimized side holds more (an uneven shard): the ratio divides by its peak, not rank 0's."""
    from bench.measure.memory import over_ranks
    from bench.record.contract import variant_metrics, variant_tags

    b, o = pair(tmp_path, [], [])
    b.memory = Memory(**over_ranks([rank_memory(900.0, [800.0] * 5), rank_memory(900.0, [800.0] * 5)]))
    o.memory = Memory(**over_ranks([rank_memory(450.0, [380.0] * 5), rank_memory(470.0, [400.0] * 5)]))
    c = compare(b, o)
    assert c.speedup == pytest.approx(2.0) and c.speedup_ci_low == c.speedup_ci_high  # 800 / 400, exact
    metrics, tags = variant_metrics(o), variant_tags(o)
    assert metrics["mem_call_peak_mb"] == 400.0 and metrics["mem_peak_mb"] == 470.0
    assert (metrics["mem_rank0_call_peak_mb"], metrics["mem_rank1_call_peak_mb"]) == (380.0, 400.0)
    assert (metrics["mem_rank0_peak_mb"], metrics["mem_rank1_peak_mb"]) == (450.0, 470.0)
    assert tags["perflab.mem_peak_rank"] == "1" and tags["perflab.mem_call_peak_rank"] == "1"


RANKS_BENCH = """
import torch
from bench import BenchmarkConfig, context
import torch.distributed as dist

class Uneven:
    def get_config(self):
        return BenchmarkConfig(world_size=2)

    def setup(self):
        ctx = context()
        # rank 1 holds 192 MiB more, every page written: its process's peak RSS is the larger
        self.ballast = torch.ones(48 * 2**20) if ctx.rank == 1 else None
        self.x = torch.full((1000,), float(ctx.rank + 1))
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        self.out.copy_(self.x)
        dist.all_reduce(self.out)

    def teardown(self):
        del self.ballast, self.x, self.out

    def get_output(self):
        return self.out

    def speedup_metric(self):
        return "peak_memory"

def get_benchmark():
    return Uneven()
"""


def test_ranks_report_the_most_any_rank_held(tmp_path: Path) -> None:
    """Two gloo ranks on the CPU, rank 1 the fuller: the variant's memory is rank 1's, every rank's kept. (On the
    CPU the reading is each rank's peak RSS and no call peaks are taken; on GPUs the same merge takes the call
    peaks: test_over_ranks_takes_each_reading_from_the_rank_that_held_most.)"""
    from bench.define.result import VariantSpec
    from bench.isolate.runner import run_variant

    path = tmp_path / "ch98" / "baseline_uneven.py"
    path.parent.mkdir(parents=True)
    path.write_text(RANKS_BENCH)
    spec = VariantSpec(chapter="ch98", example="uneven", variant="baseline", path=str(path))
    layer = {"device": "cpu", "iterations": 3, "warmup": 1, "min_warmup_seconds": 0.0, "timeout_multiplier": 4.0}
    r = run_variant(spec, tmp_path / "wd", cli_layer=layer)
    assert r.status == "ok", r.error
    m = r.memory
    assert len(m.rank_peak_mb) == 2 and m.peak_rank == 1
    assert m.rank_peak_mb[1] > m.rank_peak_mb[0] + 150  # the ballast, seen in rank 1's own reading
    assert m.peak_mb == m.rss_peak_mb == max(m.rank_peak_mb)
    assert m.metric == "peak_memory" and m.call_peaks_mb == [] and m.call_peak_rank is None
