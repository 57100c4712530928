"""Quality as a pair's verdict: a benchmark whose benefit is a better result at about the same time says so.

A benchmark declares what its pair is compared on with ``speedup_metric()`` (bench.measure.memory lists the
memory metrics). A benchmark may name a metric it reports itself:

* ``"quality"``: higher is better (an accuracy, a score, tokens accepted per step); the ratio is optimized /
  baseline, > 1 when the optimized side does better;
* ``"error"``: lower is better (a loss, a relative error, a perplexity); the ratio is baseline / optimized, > 1
  when the optimized side errs less.

and then reports it with ``metrics()``: a dict holding that name, its value one number or a list of readings, one
per evaluated item (a request, a batch, a seed), taken from what the timed calls produced. The readings are read
once, in the check stage after the timed calls, so they are the measured program's and not a separate run's.
Their statistic is the mean (an accuracy is the mean of per-item scores). Where both sides give as many readings
they are taken as the same items in the same order and the interval is a paired percentile bootstrap of the
ratio of means (the items' own difficulty cancels); otherwise the sides are resampled independently. A single
reading on each side gives the ratio with no interval: the harness cannot tell a difference from noise there,
and the pair gets no verdict. Time is still measured and shown beside it, so "at equal time" can be read off.

A lossy optimization (an early exit, dropped tokens) turns it round: its verdict is on time, and its outputs
differ from the baseline's by design, so comparing them proves nothing. Such a pair declares ``verify="quality"``
and a ``quality_floor`` in its config and reports ``metrics()["quality"]`` on both sides; it is verified when the
95 % interval of mean(optimized) / mean(baseline) lies at or above the floor (``verify_quality``), a mismatch
when its low end is below, never verified by default (no readings, no floor, one reading a side).
"""

from __future__ import annotations

import math
from typing import Any

from bench.define.result import Verification
from bench.errors import ProtocolError

# The metric → whether higher is better.
QUALITY_METRICS = {"quality": True, "error": False}
BOOTSTRAP = 4000


def readings(obj: Any, metric: str) -> list[float]:
    """The benchmark's readings of ``metric`` from ``metrics()``: a ProtocolError naming what is wrong when the
    method is missing, the name absent, or a reading not a finite number."""
    get = getattr(obj, "metrics", None)
    if not callable(get):
        raise ProtocolError(f"speedup_metric() is {metric!r} but the benchmark has no metrics() reporting it")
    values = get()
    if not isinstance(values, dict) or metric not in values:
        raise ProtocolError(f"metrics() returned {values!r}; expected a dict with the key {metric!r}")
    raw = values[metric]
    items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    try:
        out = [float(x) for x in items]
    except (TypeError, ValueError):
        raise ProtocolError(f"metrics()[{metric!r}] = {raw!r}: expected a number or a list of numbers") from None
    if not out or not all(math.isfinite(x) for x in out):
        raise ProtocolError(f"metrics()[{metric!r}] = {raw!r}: expected finite numbers, at least one")
    return out


def quality_ratio(baseline: Any, optimized: Any) -> tuple[float | None, float | None, float | None, str] | None:
    """(the ratio on the optimized side's quality metric, > 1 when it does better; its 95 % interval; the metric)
    for a pair whose optimized side names one (None for any other pair); the ratio is None where a side has no
    readings or a mean is not positive, the interval None with one reading a side."""
    q = optimized.quality
    if q is None or q.metric not in QUALITY_METRICS or not q.verdict:
        return None
    b = baseline.quality.readings if baseline.quality is not None and baseline.quality.metric == q.metric else []
    o = q.readings
    higher = QUALITY_METRICS[q.metric]
    num, den = (o, b) if higher else (b, o)
    if not b or not o or _mean(num) <= 0 or _mean(den) <= 0:
        return None, None, None, q.metric
    ratio = _mean(num) / _mean(den)
    if len(b) < 2 or len(o) < 2:
        return ratio, None, None, q.metric
    low, high = mean_ratio_interval(num, den)
    return ratio, low, high, q.metric


def mean_ratio_interval(num: list[float], den: list[float], n: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of mean(num) / mean(den): paired (the same indices drawn on both sides)
    when they have as many readings, else each side resampled on its own."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a, b = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    ia = rng.integers(0, a.size, (n, a.size))
    ib = ia if a.size == b.size else rng.integers(0, b.size, (n, b.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = a[ia].mean(axis=1) / b[ib].mean(axis=1)
    ratios = ratios[np.isfinite(ratios)]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def verify_quality(baseline: Any, optimized: Any) -> Verification:
    """A lossy pair's verification (``verify="quality"``): the interval of mean(optimized) / mean(baseline) of
    ``metrics()["quality"]`` held against the optimized side's ``quality_floor``."""
    floor = optimized.config.get("quality_floor")
    if floor is None:
        return Verification(verified=False, detail='verify="quality" without a quality_floor in get_config()')
    sides = [r.quality.readings if r.quality is not None and r.quality.metric == "quality" else [] for r in
             (baseline, optimized)]  # fmt: skip
    if len(sides[0]) < 2 or len(sides[1]) < 2 or _mean(sides[0]) <= 0:
        return Verification(verified=False, detail=f"quality readings: {len(sides[0])} baseline, {len(sides[1])} "
                            "optimized (at least 2 each, a positive baseline mean): not verified")  # fmt: skip
    ratio = _mean(sides[1]) / _mean(sides[0])
    low, high = mean_ratio_interval(sides[1], sides[0])
    text = (f"quality {_mean(sides[1]):.4g} against the baseline's {_mean(sides[0]):.4g}: {ratio:.4f} of it "
            f"[{low:.4f}, {high:.4f}]")  # fmt: skip
    if low >= floor:
        return Verification(verified=True, outcome="match", detail=f"{text}, at or above the floor {floor:g}")
    return Verification(verified=False, outcome="mismatch", detail=f"{text}, below the floor {floor:g}")
