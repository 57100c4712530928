"""A pair measured in rounds: its speedup, the interval that carries the round-to-round spread, and when to stop.

Baseline and optimized alternate, each round a fresh child per side (bench.isolate.rounds), the order reversed
every other round (A B, B A, A B: a drift linear in time shifts both sides alike over two rounds). Each round r
gives one ratio of medians, baseline over optimized. The speedup is their geometric mean and its 95 % interval
a Student t interval on the log ratios with R - 1 degrees of freedom: load that came and went between the
sides of a round, or between rounds, is in the ratios' spread, so the interval carries it (one process per
side could not show it; ``bench.measure.stats.speedup_interval`` then adds an assumed run-to-run term).

When to stop (``decide``): a pair is done once its interval is narrow (each half within ``precision``,
±2 % by default) at two rounds in a row, clearly decided (beyond the noise band, ±``noise_threshold``, by at least
``DECIDED`` times its half-width, in log space), or equivalent (the interval within the band: no verdict,
bench.measure.stats.significance). Stopping on significance would inflate false verdicts (each look another
chance); width does not depend on where the interval lies, but an early stop, on any of these rules, picks rounds
whose spread was small by chance, and their 95 % interval is too narrow: simulated A/A pairs read a verdict in up
to 7-8 % where the rounds' spread is about the precision, and a true 1.1x fell outside in 7-8 % at a spread of
3-5 % (both without a noise band). So a pair that stopped early reports its interval at ``EARLY_LEVEL`` (98 %); one
that ran all its rounds at ``FULL_LEVEL`` (96 %): those are a selection too (the pairs whose rounds did not happen
to agree early), and at 95 % they read a verdict in 5.5-5.8 % where the spread is 5 %. Simulated over 10,000 pairs
per spread (normal and t(3) spreads of 0.3-15 %, seeds 1 and 7; tests/bench/measure/test_round_stats.py's
``_simulate``), with a noise threshold of 0: A/A pairs read a verdict in 1.5-4.9 % (5.2-7.0 % with 95 %
everywhere), a true 1.1x falls outside in 1.4-5.2 %; with the default ±1 %: A/A pairs 0-2.8 % (at a spread of
0.3 %, 92 % of them settle equivalent, in 3.2 rounds on average), a true 1.1x outside in 1.5-5.4 %. The rounds
are those of the 95 % rule: a large difference (a slow call's 2x) settles in the minimum of rounds; an interval is
wider than the 95 % one (t at 99 % over t at 97.5 %: +62 % at 3 rounds, +31 % at 6; at 98 % over 97.5 %, +6.5 %
at 8).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from bench.measure.stats import significance, t_quantile, within_noise

DECIDED = 4.0  # a "decided" pair's |log speedup| is at least this many half-widths of its interval
Stop = str  # "precision", "decided", "equivalent", "max_rounds", "time_limit", or why no more rounds could run
# The level of the interval a pair reports when its rounds stopped early (precision, decided, equivalent): each look at
# the rounds was another chance that their spread was small by chance, and an early stop picks those. 98 % is the
# level at which simulated A/A pairs read a verdict in at most ~5 % at every noise level (see the docstring).
EARLY_LEVEL = 0.98
EARLY = ("precision", "decided", "equivalent")
FULL_LEVEL = 0.96  # every other stop's (all the rounds ran): with 95 % there, 5.5-5.8 % of A/A pairs read a verdict


def split_rounds(samples: Sequence[float], sizes: Sequence[int]) -> list[list[float]]:
    """``samples`` cut into its rounds' (``sizes``: each round's count, in order: ``Timing.rounds``)."""
    out, at = [], 0
    for n in sizes:
        out.append(list(samples[at : at + n]))
        at += n
    return out


def round_ratios(baseline: Sequence[Sequence[float]], optimized: Sequence[Sequence[float]]) -> list[float]:
    """Each round's ratio of medians, baseline over optimized; rounds paired by index (the shorter side's
    count); a round with a side empty or at 0 ms gives none."""
    out = []
    for b, o in zip(baseline, optimized, strict=False):
        if b and o:
            mb, mo = statistics.median(b), statistics.median(o)
            if mb > 0 and mo > 0:
                out.append(mb / mo)
    return out


def rounds_interval(ratios: Sequence[float], stop: Stop | None = None) -> tuple[float, float, float] | None:
    """(speedup, low, high): the geometric mean of the rounds' ratios and its t interval, at EARLY_LEVEL where
    ``stop`` says the rounds stopped early, FULL_LEVEL after another stop, 95 % without one (a look while the rounds
    go on); None with fewer than 2 rounds."""
    if len(ratios) < 2:
        return None
    logs = [math.log(r) for r in ratios]
    center = statistics.fmean(logs)
    sd = math.sqrt(math.fsum((x - center) ** 2 for x in logs) / (len(logs) - 1))  # statistics.stdev's, in floats
    half = t_quantile(len(logs) - 1, (1 + interval_level(stop)) / 2) * sd / math.sqrt(len(logs))
    return math.exp(center), math.exp(center - half), math.exp(center + half)


def interval_level(stop: Stop | None) -> float:
    """The level of a pair's interval over its rounds: EARLY_LEVEL where ``stop`` says they stopped early,
    FULL_LEVEL after another stop, 95 % without one (a look while the rounds go on)."""
    return EARLY_LEVEL if stop in EARLY else FULL_LEVEL if stop else 0.95


def half_width(low: float, high: float) -> float:
    """Half the interval's width, in log space (0.0198 ≈ ±2 %)."""
    return (math.log(high) - math.log(low)) / 2


def decide(ratios: Sequence[float], precision: float, noise_threshold: float = 0.0) -> Stop | None:
    """Why a pair with these rounds' ratios needs no more rounds, or None: "decided" (beyond the band
    ±``noise_threshold`` by at least DECIDED half-widths, in log space: beyond 1.0 with a threshold of 0),
    "equivalent" (the interval within that band: any difference it shows is below the threshold, no verdict;
    bench.measure.stats.significance), "precision" (each half of the interval within ``precision``, now and one
    round before)."""
    now = rounds_interval(ratios)
    if now is None:
        return None
    speedup, low, high = now
    verdict = significance(low, high, noise_threshold)
    beyond = abs(math.log(speedup)) - math.log1p(noise_threshold)  # from the band's edge
    if verdict in ("faster", "slower") and beyond >= DECIDED * half_width(low, high):
        return "decided"
    if within_noise(low, high, noise_threshold):
        return "equivalent"
    before = rounds_interval(ratios[:-1])
    if before is not None and all(half_width(*i[1:]) <= math.log1p(precision) for i in (now, before)):
        return "precision"
    return None
