"""Statistics over raw timing samples. Nothing here invents, drops or clamps a sample."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

from bench.define.timing import TimingStats

DEFAULT_PERCENTILES: tuple[float, ...] = (25.0, 50.0, 75.0, 90.0, 95.0, 99.0)
BOOTSTRAP = 2000  # resamples behind a speedup's interval
Z_975 = 1.959963984540054  # the standard normal's 97.5 % quantile


def _label(p: float) -> str:
    return f"p{int(p)}" if float(p).is_integer() else f"p{p:g}".replace(".", "_")


def summarize(samples_ms: Sequence[float], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> TimingStats:
    """Mean, median, sample std (ddof=1), min, max, IQR, CV and percentiles of raw samples.

    Percentiles use linear interpolation between order statistics (numpy's default), never the
    nearest rank, so p99 of 30 samples lies between the two largest rather than being the max by fiat.
    The standard percentiles p25/p50/p75/p90/p95/p99 are always present.
    """
    import numpy as np  # here, not at import: the parent's first summary comes after its start-up

    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size == 0:
        raise ValueError("summarize() needs at least one sample, got an empty sequence")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"samples must be finite, got {x[~np.isfinite(x)][:3].tolist()}")
    ps = sorted(set(DEFAULT_PERCENTILES) | {float(p) for p in percentiles})
    values = np.percentile(x, ps)
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    q25, q75 = np.percentile(x, [25.0, 75.0])
    return TimingStats(
        n=int(x.size),
        mean_ms=mean,
        median_ms=float(np.median(x)),
        std_ms=std,
        min_ms=float(x.min()),
        max_ms=float(x.max()),
        iqr_ms=float(q75 - q25),
        cv=std / mean if mean > 0 else 0.0,
        percentiles_ms={_label(p): float(v) for p, v in zip(ps, values, strict=True)},
    )


def speedup_interval(
    baseline_ms: list[float], optimized_ms: list[float], run_noise: float, n: int = BOOTSTRAP, seed: int = 0
) -> tuple[float, float] | None:
    """95 % interval of median(baseline) / median(optimized): a percentile bootstrap over both sides' raw
    samples (resampled independently), then widened by the run-to-run term (``widen``). None with fewer than
    2 samples on a side, or where a resampled median is at or below 0 (a clock that saw no work: a CPU-only call
    on CUDA events reads about 0 ms, a flush subtracted from it below): no ratio of such times means anything."""
    if len(baseline_ms) < 2 or len(optimized_ms) < 2:
        return None
    import numpy as np

    rng = np.random.default_rng(seed)
    b, o = np.asarray(baseline_ms, dtype=np.float64), np.asarray(optimized_ms, dtype=np.float64)
    ratios = []
    chunk = max(1, 2_000_000 // max(b.size, o.size))  # bounded memory for long sample lists
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        mb = np.median(b[rng.integers(0, b.size, (k, b.size))], axis=1)
        mo = np.median(o[rng.integers(0, o.size, (k, o.size))], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero median (a clock's tick) is refused below
            ratios.append(mb / mo)
    pooled = np.concatenate(ratios)
    if not np.all(np.isfinite(pooled)) or pooled.min() <= 0:
        return None
    lo, hi = np.percentile(pooled, [2.5, 97.5])
    return widen(float(np.median(b)) / float(np.median(o)), float(lo), float(hi), run_noise)


def _pooled_percentiles(clusters: list[Any], draws: Any, q: float) -> Any:
    """The ``q``-th percentile of each row of ``draws`` (cluster indices) pooled; clusters of one length at once,
    a block of rows at a time (a percentile does not depend on the order of the values pooled)."""
    import numpy as np

    if len({len(c) for c in clusters}) > 1:
        return np.asarray([np.percentile(np.concatenate([clusters[i] for i in row]), q) for row in draws])
    stacked = np.stack(clusters)
    rows = max(1, 2_000_000 // stacked.size)  # ~16 MB of values a block
    return np.concatenate([np.percentile(stacked[draws[i : i + rows]].reshape(len(draws[i : i + rows]), -1), q,
                                         axis=1) for i in range(0, len(draws), rows)])  # fmt: skip


def cluster_speedup_interval(
    baseline: Sequence[Sequence[float]], optimized: Sequence[Sequence[float]], q: float, run_noise: float,
    n: int = BOOTSTRAP, seed: int = 0,
) -> tuple[float, float] | None:  # fmt: skip
    """95 % interval of the ratio of the ``q``-th percentile (linear, of all of a side's values pooled) of
    baseline over optimized, where each side's values come in clusters (one per generation): a percentile
    bootstrap that resamples whole clusters with replacement on each side independently, pools them and takes
    the percentile. With few clusters a percentile bootstrap is too narrow (it sees only the spread among the
    clusters it has), so each log half-width is scaled by t(G - 1) / z at 97.5 %, G the smaller side's cluster
    count (8 generations a side, simulated: coverage of an A/A ratio 89-96 % without, 94-99 % with; see
    scripts/timing/cluster_coverage_sim.py); then widened by the run-to-run term (``widen``). Values within a
    cluster share its steps and are not independent; resampling single values would treat a slow generation's
    block of stalls as scattered luck and give too narrow an interval. None with fewer than 2 clusters on a
    side, an empty cluster, or a side's percentile of 0 (in the data or in a resample: no finite ratio)."""
    sides = [[list(c) for c in side] for side in (baseline, optimized)]
    if min(len(side) for side in sides) < 2 or any(not c for side in sides for c in side):
        return None
    import numpy as np

    rng = np.random.default_rng(seed)
    stats = []
    for side in sides:
        clusters = [np.asarray(c, dtype=np.float64) for c in side]
        point = float(np.percentile(np.concatenate(clusters), q))
        draws = rng.integers(0, len(clusters), (n, len(clusters)))
        stats.append((point, _pooled_percentiles(clusters, draws, q)))
    (b, boot_b), (o, boot_o) = stats
    if b <= 0 or o <= 0 or np.any(boot_b <= 0) or np.any(boot_o <= 0):
        return None
    lo, hi = np.percentile(boot_b / boot_o, [2.5, 97.5])
    scale = t_975(min(len(side) for side in sides) - 1) / Z_975
    return widen(b / o, float(lo), float(hi), run_noise, scale)


def t_975(nu: int) -> float:
    """Student's t quantile at 97.5 % with ``nu`` degrees of freedom (``t_quantile``)."""
    return t_quantile(nu, 0.975)


def t_quantile(nu: int, p: float) -> float:
    """Student's t quantile at ``p`` (0.5 < p < 1) with ``nu`` degrees of freedom: exact for 1 and 2, else a
    Cornish-Fisher expansion (from 3 on within 0.004 of the exact value at 97.5 %, 0.02 at 99 %)."""
    if nu < 1:
        raise ValueError(f"nu={nu} is not a number of degrees of freedom (>= 1)")
    if not 0.5 < p < 1:
        raise ValueError(f"p={p} is not an upper quantile's probability (0.5 < p < 1)")
    if nu == 1:
        return math.tan(math.pi * (p - 0.5))
    if nu == 2:
        return (2 * p - 1) * math.sqrt(2.0 / (4 * p * (1 - p)))
    z = Z_975 if p == 0.975 else NormalDist().inv_cdf(p)
    return (
        z
        + (z**3 + z) / (4 * nu)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * nu**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * nu**4)
    )


def widen(ratio: float, lo: float, hi: float, run_noise: float, scale: float = 1.0) -> tuple[float, float]:
    """A bootstrap interval ``lo``..``hi`` of a speedup ``ratio`` widened: each half-width, in log space, times
    ``scale`` (a small-sample factor), then added in quadrature to the run-to-run term 1.96·√2·``run_noise``
    (two runs, each its statistic's spread between processes)."""
    center = math.log(ratio)
    extra = 1.96 * math.sqrt(2.0) * run_noise
    down = math.sqrt((scale * max(center - math.log(lo), 0.0)) ** 2 + extra**2)
    up = math.sqrt((scale * max(math.log(hi) - center, 0.0)) ** 2 + extra**2)
    return math.exp(center - down), math.exp(center + up)


def significance(low: float | None, high: float | None, noise_threshold: float = 0.0) -> str | None:
    """A speedup's verdict from its interval: "faster" when it lies above 1 + ``noise_threshold``, "slower" when below
    1 / (1 + ``noise_threshold``) (a band symmetric in log space: ±1 % is 0.990..1.01), else "no significant
    difference", an interval that excludes 1.0 within the band included; None without an interval."""
    if low is None or high is None:
        return None
    band = 1.0 + noise_threshold
    return "faster" if low > band else "slower" if high < 1.0 / band else "no significant difference"


def within_noise(low: float, high: float, noise_threshold: float) -> bool:
    """The interval lies inside the band ±``noise_threshold`` (``significance``'s): any difference it shows is
    smaller than the threshold; never with a threshold of 0."""
    band = 1.0 + noise_threshold
    return 1.0 / band < low and high < band
