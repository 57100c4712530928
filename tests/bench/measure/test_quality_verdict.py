"""A pair whose benefit is a score it reports (bench.measure.quality): the verdict is on the score, not the time."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.define.result import Quality
from bench.errors import ProtocolError
from bench.measure.basis import basis
from bench.measure.compare import compare
from bench.measure.memory import declared_metric
from bench.measure.quality import readings
from tests.bench.measure.test_compare import ref, variant


def pair(tmp_path: Path, base: list[float], opt: list[float], metric: str = "quality",
         base_ms: float = 1.0, opt_ms: float = 1.0, base_metric: str | None = None) -> tuple:  # fmt: skip
    out = ref()
    b = variant(tmp_path, "baseline", [out], median_ms=base_ms)
    o = variant(tmp_path, "optimized", [out.clone()], median_ms=opt_ms)
    b.quality = Quality(metric=base_metric or metric, readings=base)
    o.quality = Quality(metric=metric, readings=opt)
    return b, o


# Per-item scores of 40 items: the optimized side gets 6 more right and none wrong that the baseline got right.
BASE = [1.0] * 24 + [0.0] * 16
BETTER = [1.0] * 30 + [0.0] * 10


def test_better_score_at_equal_time_is_the_verdict(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, BASE, BETTER))
    assert c.speedup_metric == "quality" and c.status == "ok"
    assert c.speedup == pytest.approx(30 / 24)
    assert 1.0 < c.speedup_ci_low < c.speedup < c.speedup_ci_high  # paired: the 6 items are the evidence
    assert c.significance == "faster"  # on its metric: better
    assert (c.baseline_value, c.optimized_value) == (pytest.approx(0.6), pytest.approx(0.75))


def test_faster_time_does_not_rescue_a_worse_score(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, BETTER, BASE, base_ms=2.0, opt_ms=1.0))  # twice as fast, worse answers
    assert c.speedup == pytest.approx(24 / 30) and c.significance == "slower"


def test_error_metric_is_inverted(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, [0.2, 0.21, 0.19, 0.2], [0.1, 0.11, 0.09, 0.1], metric="error"))
    assert c.speedup == pytest.approx(2.0) and c.significance == "faster"  # half the error


def test_a_small_worse_score_is_a_verdict_the_noise_threshold_is_a_clocks(tmp_path: Path) -> None:
    """Every item's error 0.5 % higher: what the pair changes, not process-to-process noise, so "slower" (worse)
    under the default ±1 % noise threshold, which only a time's verdict uses."""
    base = [0.2, 0.21, 0.19, 0.2]
    c = compare(*pair(tmp_path, base, [x * 1.005 for x in base], metric="error"))
    assert c.speedup == pytest.approx(1 / 1.005) and c.speedup_ci_high < 1.0
    assert c.significance == "slower" and c.noise_threshold == 0.0


def test_same_scores_are_no_difference(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, BASE, list(BASE)))
    assert c.speedup == 1.0 and c.significance == "no significant difference"


def test_one_reading_a_side_gives_no_verdict(tmp_path: Path) -> None:
    c = compare(*pair(tmp_path, [0.5], [0.9]))
    assert c.speedup == pytest.approx(1.8) and c.speedup_ci_low is None and c.significance is None


def test_baseline_without_the_metric_gives_no_ratio(tmp_path: Path) -> None:
    b, o = pair(tmp_path, BASE, BETTER)
    b.quality = None
    c = compare(b, o)
    assert c.speedup is None and c.speedup_metric == "quality"


def test_basis_names_the_score() -> None:
    assert basis("quality").label == "quality" and basis("quality").rate
    assert basis("error").metric == "quality_mean" and not basis("error").rate


def test_readings_logged_as_mean_and_count(tmp_path: Path) -> None:
    from bench.record.contract import variant_metrics

    b, _ = pair(tmp_path, BASE, BETTER)
    m = variant_metrics(b)
    assert m["quality_mean"] == pytest.approx(0.6) and m["quality_n"] == 40.0


class Scored:
    def __init__(self, value: object) -> None:
        self.value = value

    def speedup_metric(self) -> str:
        return "quality"

    def metrics(self) -> object:
        return self.value


def test_readings_refuse_bad_reports() -> None:
    assert declared_metric(Scored(None)) == "quality"
    assert readings(Scored({"quality": 0.5}), "quality") == [0.5]
    assert readings(Scored({"quality": (1, 0, 1)}), "quality") == [1.0, 0.0, 1.0]
    with pytest.raises(ProtocolError, match="key 'quality'"):
        readings(Scored({"accuracy": 0.5}), "quality")
    with pytest.raises(ProtocolError, match="finite"):
        readings(Scored({"quality": [float("nan")]}), "quality")
    with pytest.raises(ProtocolError, match="no metrics"):
        readings(object(), "quality")


BENCH = """
import torch
from bench import context

class Scored:
    def setup(self):
        self.x = torch.randn(64, generator=torch.Generator().manual_seed(0))
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        torch.mul(self.x, 2.0, out=self.out)

    def teardown(self):
        del self.x, self.out

    def get_output(self):
        return self.out

    def speedup_metric(self):
        return "quality"

    def metrics(self):
        return {"quality": (self.out == 2 * self.x).float().tolist()}  # each item right or wrong

def get_benchmark():
    return Scored()
"""


def test_child_sends_the_readings_of_the_timed_calls(tmp_path: Path) -> None:
    from bench.define.result import VariantSpec
    from bench.isolate.runner import run_variant

    path = tmp_path / "ch98" / "baseline_scored.py"
    path.parent.mkdir(parents=True)
    path.write_text(BENCH)
    spec = VariantSpec(chapter="ch98", example="scored", variant="baseline", path=str(path))
    r = run_variant(spec, tmp_path / "wd", cli_layer={"device": "cpu", "iterations": 3, "warmup": 1})
    assert r.status == "ok", r.error
    assert r.quality is not None and r.quality.metric == "quality" and r.quality.readings == [1.0] * 64


def lossy(tmp_path: Path, base: list[float], opt: list[float], floor: float | None = 0.97) -> tuple:
    """A lossy pair (verify="quality"): different outputs by design, faster, its quality held to a floor."""
    config = {"verify": "quality", "quality_floor": floor}
    b = variant(tmp_path, "baseline", [ref()], median_ms=2.0, config=config)
    o = variant(tmp_path, "optimized", [ref(seed=1)], median_ms=1.0, config=config)
    b.quality = Quality(metric="quality", readings=base, verdict=False)
    o.quality = Quality(metric="quality", readings=opt, verdict=False)
    return b, o


# 400 items: the baseline right on all, the lossy side wrong on 4 (1 %) or on 40 (10 %).
ALL = [1.0] * 400
MOST = [1.0] * 396 + [0.0] * 4
FEWER = [1.0] * 360 + [0.0] * 40


def test_lossy_pair_verified_by_its_quality_and_judged_on_time(tmp_path: Path) -> None:
    c = compare(*lossy(tmp_path, ALL, MOST))
    assert c.verification.verified and c.verification.outcome == "match", c.verification.detail
    assert "0.99" in c.verification.detail and "floor 0.97" in c.verification.detail
    assert c.speedup_metric == "time" and c.speedup == pytest.approx(2.0)  # the verdict stays on time


def test_lossy_pair_below_its_floor_is_a_mismatch(tmp_path: Path) -> None:
    c = compare(*lossy(tmp_path, ALL, FEWER))  # 0.90 of the baseline's quality
    assert not c.verification.verified and c.verification.outcome == "mismatch" and c.status == "mismatch"


def test_lossy_pair_without_floor_or_readings_is_not_verified(tmp_path: Path) -> None:
    assert not compare(*lossy(tmp_path, ALL, MOST, floor=None)).verification.verified
    b, o = lossy(tmp_path, ALL, MOST)
    o.quality = None
    c = compare(b, o)
    assert not c.verification.verified and c.verification.outcome == "inconclusive"
