"""bench/measure/stats.py: statistics derived from raw samples; nothing invented, dropped or clamped."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from bench.measure.stats import summarize

ONE_TO_TEN = [float(i) for i in range(1, 11)]


def test_percentiles_are_interpolated_not_nearest_rank() -> None:
    s = summarize(ONE_TO_TEN)
    p = s.percentiles_ms
    assert p["p90"] == pytest.approx(9.1)  # nearest rank would say 9 or 10
    assert p["p25"] == pytest.approx(3.25)
    assert p["p50"] == pytest.approx(5.5)
    assert p["p75"] == pytest.approx(7.75)
    assert p["p95"] == pytest.approx(9.55)
    assert p["p99"] == pytest.approx(9.91)  # below the max: not the max by fiat


def test_p99_of_three_samples_is_not_the_max() -> None:
    s = summarize([1.0, 2.0, 10.0])
    assert s.percentiles_ms["p99"] < s.max_ms == 10.0


def test_centre_and_spread() -> None:
    xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    s = summarize(xs)
    assert s.n == 8
    assert s.mean_ms == pytest.approx(statistics.fmean(xs))
    assert s.median_ms == pytest.approx(statistics.median(xs)) == pytest.approx(3.5)
    assert s.std_ms == pytest.approx(statistics.stdev(xs))  # ddof=1
    assert s.std_ms != pytest.approx(statistics.pstdev(xs))
    assert s.min_ms == 1.0 and s.max_ms == 9.0
    q = statistics.quantiles(xs, n=4, method="inclusive")
    assert s.iqr_ms == pytest.approx(q[2] - q[0])
    assert s.cv == pytest.approx(statistics.stdev(xs) / statistics.fmean(xs))


def test_single_sample() -> None:
    s = summarize([2.5])
    assert (s.n, s.median_ms, s.std_ms, s.iqr_ms, s.cv) == (1, 2.5, 0.0, 0.0, 0.0)
    assert all(v == 2.5 for v in s.percentiles_ms.values())


def test_extra_percentiles_present_with_the_standard_ones() -> None:
    s = summarize(ONE_TO_TEN, percentiles=[10.0, 99.9, 50.0])
    p = s.percentiles_ms
    assert {"p10", "p99_9", "p25", "p50", "p75", "p90", "p95", "p99"} <= set(p)
    assert p["p10"] == pytest.approx(1.9)
    assert p["p99_9"] == pytest.approx(9.991)


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [1.0, math.inf]])
def test_empty_or_non_finite_samples_rejected(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(bad)


def test_samples_not_modified() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    arr = np.array(xs)
    summarize(xs)
    summarize(arr, percentiles=[10.0])
    assert xs == [5.0, 1.0, 3.0, 2.0, 4.0]  # not sorted in place
    assert arr.tolist() == [5.0, 1.0, 3.0, 2.0, 4.0]
