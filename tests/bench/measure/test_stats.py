"""bench/measure/stats.py: statistics derived from raw samples; nothing invented, dropped or clamped."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from bench.measure.stats import cluster_speedup_interval, speedup_interval, summarize, widen

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


def _clusters(rng: np.random.Generator, n: int, size: int, scale: float) -> list[list[float]]:
    return [list(rng.gamma(4.0, scale / 4.0, size)) for _ in range(n)]


def test_cluster_interval_resamples_whole_clusters() -> None:
    """One generation of stalls: drawn or not, it moves the p99 a lot, so the interval is wide; the very same
    values spread over every generation give a p99 that barely moves (a per-value bootstrap sees no
    difference between the two)."""
    rng = np.random.default_rng(3)
    base = _clusters(rng, 10, 100, 10.0)
    block = [[30.0 + v for v in c] if i == 0 else c for i, c in enumerate(_clusters(rng, 10, 100, 1.0))]
    pooled = np.asarray(block).ravel()
    spread = [list(pooled[i::10]) for i in range(10)]  # each generation gets ten of the stalls
    assert sorted(v for c in spread for v in c) == sorted(pooled.tolist())
    lo_b, hi_b = cluster_speedup_interval(base, block, 99.0, 0.0) or (0.0, 0.0)
    lo_s, hi_s = cluster_speedup_interval(base, spread, 99.0, 0.0) or (0.0, 0.0)
    point = float(np.percentile(np.concatenate(base), 99)) / float(np.percentile(pooled, 99))
    assert lo_b <= point <= hi_b and lo_s <= point <= hi_s
    assert math.log(hi_b / lo_b) > 3 * math.log(hi_s / lo_s)


def test_cluster_interval_degenerate_and_too_few_clusters() -> None:
    """Equal values: the bootstrap has no spread, the interval is the run-to-run term around the ratio. One
    generation on a side, or a percentile of 0, gives none."""
    lo, hi = cluster_speedup_interval([[4.0] * 5] * 3, [[2.0] * 5] * 3, 99.0, 0.01) or (0.0, 0.0)
    extra = 1.96 * math.sqrt(2.0) * 0.01
    assert (lo, hi) == (pytest.approx(2.0 * math.exp(-extra)), pytest.approx(2.0 * math.exp(extra)))
    assert cluster_speedup_interval([[4.0] * 5] * 3, [[2.0] * 5] * 3, 50.0, 0.0) == (pytest.approx(2.0),) * 2
    assert cluster_speedup_interval([[4.0, 5.0]], [[2.0], [3.0]], 50.0, 0.0) is None
    assert cluster_speedup_interval([[4.0], [5.0]], [[0.0, 0.0], [0.0, 1.0]], 50.0, 0.0) is None


def test_widen_adds_the_run_term_in_log_space() -> None:
    lo, hi = widen(2.0, 1.5, 2.5, 0.0)
    assert (lo, hi) == (pytest.approx(1.5), pytest.approx(2.5))
    lo, hi = widen(2.0, 1.5, 2.5, 0.1)
    extra = 1.96 * math.sqrt(2.0) * 0.1
    assert math.log(2.0 / lo) == pytest.approx(math.hypot(math.log(2.0 / 1.5), extra))
    assert math.log(hi / 2.0) == pytest.approx(math.hypot(math.log(2.5 / 2.0), extra))


def test_t_975_matches_students_table() -> None:
    from bench.measure.stats import t_975

    table = {1: 12.7062, 2: 4.3027, 3: 3.1824, 5: 2.5706, 7: 2.3646, 10: 2.2281, 30: 2.0423}
    for nu, t in table.items():
        assert abs(t_975(nu) - t) < 0.005, (nu, t_975(nu))
    with pytest.raises(ValueError, match="nu=0"):
        t_975(0)


def test_t_quantile_at_99_percent_matches_students_table() -> None:
    """The level a pair's interval has at an early stop of its rounds (bench.measure.rounds.EARLY_LEVEL)."""
    from bench.measure.stats import t_quantile

    table = {1: 31.8205, 2: 6.9646, 3: 4.5407, 5: 3.3649, 7: 2.9980, 10: 2.7638, 30: 2.4573}
    for nu, t in table.items():
        assert abs(t_quantile(nu, 0.99) - t) < 0.02, (nu, t_quantile(nu, 0.99))
    with pytest.raises(ValueError, match="p=1.2"):
        t_quantile(3, 1.2)


def test_cluster_interval_widens_by_t_for_few_generations(monkeypatch: pytest.MonkeyPatch) -> None:
    """With G generations a side, each log half-width is the bootstrap's times t(G - 1) / z."""
    from bench.measure import stats

    rng = np.random.default_rng(5)
    a = [rng.lognormal(0, 0.2, 40).tolist() for _ in range(3)]
    b = [rng.lognormal(0.1, 0.2, 40).tolist() for _ in range(3)]
    lo, hi = stats.cluster_speedup_interval(a, b, 99, 0.0)
    monkeypatch.setattr(stats, "t_975", lambda nu: stats.Z_975)
    plain_lo, plain_hi = stats.cluster_speedup_interval(a, b, 99, 0.0)
    center = math.log(np.percentile(np.concatenate(a), 99) / np.percentile(np.concatenate(b), 99))
    k = 4.3027 / stats.Z_975  # t(2) / z
    assert math.log(hi) - center == pytest.approx(k * (math.log(plain_hi) - center), rel=1e-3)
    assert center - math.log(lo) == pytest.approx(k * (center - math.log(plain_lo)), rel=1e-3)


def test_no_interval_from_times_at_or_below_zero() -> None:
    """A CPU-only call on CUDA events: each sample a call's span less the flush's median, about 0 ms either side (the
    H200 read a bootstrap low of -1.75 and the suite stopped at a math domain error). No ratio of such times."""
    rng = np.random.default_rng(0)
    near_zero = list(rng.normal(0.0005, 0.002, 40))
    assert speedup_interval(near_zero, list(rng.normal(0.002, 0.002, 40)), 0.005) is None
    assert speedup_interval([1.0, 1.1, 0.9, 1.05], near_zero, 0.005) is None
    assert speedup_interval([2.0, 2.1, 1.9, 2.05], [1.0, 1.1, 0.9, 1.05], 0.005) is not None  # real times: one
