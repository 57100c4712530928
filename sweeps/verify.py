"""Proof that the recommendation helps: it and the user's current configuration, re-run and compared.

A sweep picks its recommendation from one short trial per configuration; noise alone can crown the
wrong one (on a host-bound workload a configuration measured 11.6 % apart between two sweeps). Here
each of the two is run ``repeats`` more times, alternating (baseline, recommended, baseline, ...) so a
drift of the machine hits both alike, each run a fresh trial process exactly as in the sweep.

Statistics: each repeat gives one throughput, its measured samples / its measured wall time. A side's
figure is the mean over its repeats with a 95 % Student t interval, taken on the log scale (the mean times
exp(±t(n - 1) · CV / √n): a throughput's interval stays positive); the speedup is recommended mean / baseline
mean, its interval a t interval on the log ratio with Welch's degrees of freedom (``mean_interval``). A
sweep verifies with few repeats (5, or 2 on a quick run), and a percentile bootstrap over 2-3 values sees
only the spread among them: over 2 it gives about ±1 standard error where 95 % needs ±12.7 (t with one
degree of freedom), and read "faster" from two close pairs. An interval needs at least 2 ok repeats a side;
with fewer none is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sweeps.trial import TrialOutcome

__all__ = ["METHOD", "Side", "Verification", "mean_interval", "verification_markdown", "verify"]

METHOD = (
    "95 % Student t intervals over the repeats' throughputs (each repeat: measured samples / measured wall "
    "time of one fresh trial process), on the log scale: a side's mean times exp(±t(n - 1) · CV / √n); "
    "speedup = ratio of the means, its interval a t interval on the log ratio with Welch's degrees of freedom"
)


@dataclass
class Side:
    label: str  # "baseline" or "recommended"
    params: dict[str, Any]
    samples_per_s: list[float] = field(default_factory=list)  # the ok repeats, in run order
    statuses: list[str] = field(default_factory=list)  # every repeat's status
    errors: list[str] = field(default_factory=list)
    outcomes: list[TrialOutcome] = field(default_factory=list)
    mean: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass
class Verification:
    baseline: Side
    recommended: Side
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    method: str = METHOD


def mean_interval(a: Sequence[float], b: Sequence[float] | None = None) -> tuple[float, float | None, float | None]:
    """Mean of ``a`` with its 95 % interval; with ``b``, mean(b) / mean(a) with its interval instead (the
    module docstring's statistics). No interval with fewer than 2 values on a side or a mean not above 0."""
    from bench.measure import t_quantile

    def moments(v: Sequence[float]) -> tuple[float, float, int]:  # mean, squared standard error of its log, n
        m = math.fsum(v) / len(v)
        if len(v) < 2 or m <= 0:
            return m, math.nan, len(v)
        var = math.fsum((x - m) ** 2 for x in v) / (len(v) - 1)
        return m, var / (len(v) * m * m), len(v)

    ma, va, na = moments(a)
    if b is None:
        if math.isnan(va):
            return ma, None, None
        half = t_quantile(na - 1, 0.975) * math.sqrt(va)
        return ma, ma * math.exp(-half), ma * math.exp(half)
    mb, vb, nb = moments(b)
    ratio = mb / ma if ma > 0 else math.nan
    if math.isnan(va) or math.isnan(vb):
        return ratio, None, None
    if va + vb == 0:  # every repeat alike on both sides: no spread to widen by
        return ratio, ratio, ratio
    dof = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))  # Welch-Satterthwaite, rounded down
    half = t_quantile(max(1, math.floor(dof)), 0.975) * math.sqrt(va + vb)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def verify(
    run: Callable[[dict[str, Any]], TrialOutcome],
    recommended: dict[str, Any],
    baseline: dict[str, Any],
    repeats: int,
    echo: Callable[[str], None] = lambda _: None,
) -> Verification:
    """Run both configurations ``repeats`` times, alternating, and compare them."""
    from sweeps.recommend import describe_config

    sides = (Side("baseline", dict(baseline)), Side("recommended", dict(recommended)))
    for i in range(repeats):
        for side in sides if i % 2 == 0 else sides[::-1]:
            out = run(side.params)
            side.outcomes.append(out)
            side.statuses.append(out.status)
            sps = out.metrics.get("samples_per_s")
            if out.status == "ok" and sps is not None:
                side.samples_per_s.append(float(sps))
            elif out.error:
                side.errors.append(out.error.splitlines()[0])
            shown = f"{sps:.0f} samples/s" if out.status == "ok" and sps is not None else out.status
            echo(f"verify {side.label} ({describe_config(side.params)}) repeat {i + 1}/{repeats}: {shown}")
    for side in sides:
        if side.samples_per_s:
            side.mean, side.low, side.high = mean_interval(side.samples_per_s)
    v = Verification(*sides)
    if sides[0].samples_per_s and sides[1].samples_per_s:
        v.speedup, v.low, v.high = mean_interval(sides[0].samples_per_s, sides[1].samples_per_s)
    return v


def _interval(mean: float | None, low: float | None, high: float | None, unit: str = "", spec: str = ",.0f") -> str:
    if mean is None:
        return "—"
    if low is None or high is None:
        return f"{mean:{spec}}{unit} (no interval: fewer than 2 ok repeats)"
    return f"{mean:{spec}}{unit} [{low:{spec}}, {high:{spec}}]"


def verification_markdown(v: Verification) -> str:
    from sweeps.recommend import describe_config

    lines = [
        "## Verification: the recommendation against the current configuration",
        "",
        "| side | configuration | repeats ok | samples/s, mean [95 % interval] | each repeat |",
        "|---|---|---:|---|---|",
    ]
    for s in (v.baseline, v.recommended):
        each = ", ".join(f"{x:,.0f}" for x in s.samples_per_s) or "—"
        ok, interval = f"{len(s.samples_per_s)} of {len(s.statuses)}", _interval(s.mean, s.low, s.high)
        lines.append(f"| {s.label} | {describe_config(s.params)} | {ok} | {interval} | {each} |")
    lines.append("")
    if v.speedup is None:
        failed = [f"{s.label}: {', '.join(sorted(set(s.statuses)))} ({'; '.join(sorted(set(s.errors)))[:300]})"
                  for s in (v.baseline, v.recommended) if not s.samples_per_s]  # fmt: skip
        lines.append("**speedup**: not measured — no ok repeat on " + " and ".join(failed))
    else:
        from bench.measure import NOISE_THRESHOLD as t  # as a pair's verdict: ±1 % is no gain
        from bench.measure import significance

        said = {
            "faster": f" — the recommendation is faster (interval above {1 + t:.3g})",
            "slower": f" — slower (interval below {1 / (1 + t):.3g})",
            "no significant difference": f" — not significant (interval holds 1 or lies within ±{100 * t:g} %)",
        }
        verdict = said.get(significance(v.low, v.high, t) or "", "")
        speedup = _interval(v.speedup, v.low, v.high, "×", ".3g")
        lines.append(f"**speedup** (recommended / baseline): {speedup}{verdict}")
    lines += ["", f"_Method: {v.method}._"]
    return "\n".join(lines)
