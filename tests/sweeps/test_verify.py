"""sweeps/verify.py: alternating re-runs, t intervals, the speedup line; sweeps/plots.py: the pictures."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sweeps import plots
from sweeps.trial import TrialOutcome
from sweeps.verify import mean_interval, verification_markdown, verify

BASE = {"batch_size": 32, "num_workers": 0, "amp": False, "pin_memory": False}
REC = {"batch_size": 256, "num_workers": 8, "amp": True, "pin_memory": True, "channels_last": True}


def test_mean_interval_of_a_side_and_of_the_ratio() -> None:
    mean, lo, hi = mean_interval([100.0, 102.0, 98.0, 101.0, 99.0])
    assert mean == pytest.approx(100.0) and 98.0 <= lo < 100.0 < hi <= 102.0
    ratio, lo, hi = mean_interval([100.0, 102.0, 98.0], [150.0, 153.0, 147.0])
    assert ratio == pytest.approx(1.5) and 1.4 < lo < 1.5 < hi < 1.6
    assert mean_interval([100.0]) == (100.0, None, None)  # no interval from one repeat
    assert mean_interval([100.0], [150.0, 151.0])[1:] == (None, None)
    assert mean_interval([5.0, 5.0], [10.0, 10.0]) == (2.0, 2.0, 2.0)  # no spread on either side


def test_two_repeats_give_t_with_one_degree_of_freedom_not_a_verdict_from_two_close_pairs() -> None:
    """Two repeats a side: a side's interval is its mean times exp(±12.706 · CV / √2) (t at 97.5 % with one degree
    of freedom), so a 6 % gain read from two pairs 4 % apart each is not called faster; a percentile bootstrap over
    the two (about ±1 standard error) put it at [1.02, 1.10]: "faster"."""
    mean, lo, hi = mean_interval([1000.0, 1040.0])
    half = 12.7062 * (40 / 2**0.5) / 1020 / 2**0.5
    assert (lo, hi) == (pytest.approx(1020 * np.exp(-half), rel=1e-4), pytest.approx(1020 * np.exp(half), rel=1e-4))
    values = {32: iter([1000.0, 1040.0]), 256: iter([1100.0, 1060.0])}
    v = verify(lambda p: TrialOutcome("ok", {"samples_per_s": next(values[p["batch_size"]])}), REC, BASE, repeats=2)
    assert v.speedup == pytest.approx(1080 / 1020) and v.low < 1.0 < v.high
    assert "— not significant" in verification_markdown(v)


def test_verify_alternates_and_reports_the_interval() -> None:
    calls: list[tuple[int, ...]] = []
    rng = np.random.default_rng(0)

    def run(p: dict[str, Any]) -> TrialOutcome:
        calls.append((p["batch_size"],))
        sps = (1000.0 if p["batch_size"] == 32 else 1500.0) * (1 + 0.01 * rng.standard_normal())
        return TrialOutcome("ok", {"samples_per_s": sps})

    v = verify(run, REC, BASE, repeats=4)
    assert calls == [(32,), (256,), (256,), (32,), (32,), (256,), (256,), (32,)]  # drift hits both alike
    assert len(v.baseline.samples_per_s) == len(v.recommended.samples_per_s) == 4
    assert v.speedup == pytest.approx(1.5, rel=0.03) and v.low is not None and 1.0 < v.low < v.speedup < v.high
    md = verification_markdown(v)
    assert "| baseline | bs=32 w=0 | 4 of 4 |" in md and "| recommended | bs=256 w=8 amp pin channels_last |" in md
    assert "**speedup** (recommended / baseline): 1.5" in md and "faster (interval above 1.01)" in md
    assert "t interval on the log ratio with Welch's degrees of freedom" in md


def test_a_side_without_ok_repeats_gives_no_speedup() -> None:
    def run(p: dict[str, Any]) -> TrialOutcome:
        if p["batch_size"] == 256:
            return TrialOutcome("oom", error="CUDA out of memory")
        return TrialOutcome("ok", {"samples_per_s": 10.0})

    v = verify(run, REC, BASE, repeats=2)
    assert v.speedup is None and v.recommended.statuses == ["oom", "oom"]
    md = verification_markdown(v)
    assert "not measured — no ok repeat on recommended: oom (CUDA out of memory)" in md


ROWS = [
    {"trial": 0, "batch_size": 32, "num_workers": 0, "status": "ok", "samples_per_s": 100.0, "peak_memory_gb": 1.0},
    {"trial": 1, "batch_size": 64, "num_workers": 0, "status": "ok", "samples_per_s": 180.0, "peak_memory_gb": 2.0},
    {"trial": 2, "batch_size": 64, "num_workers": 4, "status": "ok", "samples_per_s": 170.0, "peak_memory_gb": 2.5},
    {"trial": 3, "batch_size": 128, "num_workers": 4, "status": "ok", "samples_per_s": 300.0, "peak_memory_gb": 4.0},
    {"trial": 4, "batch_size": 256, "num_workers": 4, "status": "oom"},
    {"trial": 5, "batch_size": 128, "num_workers": 0, "status": "pruned", "samples_per_s": None},
]


def test_pareto_front_keeps_only_the_undominated() -> None:
    assert [r["trial"] for r in plots.pareto_front(ROWS)] == [0, 1, 3]  # trial 2: slower and larger than 1


def test_pictures_are_pngs_even_when_empty() -> None:
    pngs = [
        plots.history_png(ROWS, "t"),
        plots.importance_png({"batch_size": 0.8, "num_workers": 0.2}, "t"),
        plots.pareto_png(ROWS, "t", recommended=3),
        plots.batch_png(ROWS, "t"),
        plots.history_png([], "t"),
        plots.importance_png(None, "t", "too few trials"),
        plots.batch_png([], "t"),
    ]
    assert all(p.startswith(b"\x89PNG") and len(p) > 2000 for p in pngs)


def test_a_recommendation_within_the_noise_threshold_is_not_called_faster() -> None:
    """0.5 % more samples/s with a tight interval [1.003, 1.007]: beyond 1, inside the harness's ±1 % noise
    threshold, so no gain is claimed (a pair's own verdict reads the same); 3 % [1.02, 1.04] is."""
    from sweeps.verify import Side, Verification

    def md(speedup: float, low: float, high: float) -> str:
        sides = [Side(side, BASE, [1000.0], ["ok"], mean=1000.0) for side in ("baseline", "recommended")]
        return verification_markdown(Verification(*sides, speedup=speedup, low=low, high=high))

    assert "not significant (interval holds 1 or lies within ±1 %)" in md(1.005, 1.003, 1.007)
    assert "faster (interval above 1.01)" in md(1.03, 1.02, 1.04)
    assert "slower (interval below 0.99)" in md(0.95, 0.94, 0.96)
