"""bench/measure/rounds.py: a pair's speedup over interleaved rounds, its t interval, when its rounds stop; and
bench/measure/compare.py taking it from both sides' rounds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as sps

from bench.define.config import BenchmarkConfig
from bench.define.result import Timing
from bench.measure.compare import compare
from bench.measure.rounds import EARLY_LEVEL, FULL_LEVEL, decide, half_width, round_ratios, rounds_interval
from bench.measure.stats import significance, summarize
from tests.bench.measure.test_compare import variant


def test_the_speedup_is_the_geometric_mean_of_the_rounds_ratios_with_a_t_interval() -> None:
    ratios = [1.10, 0.95, 1.30, 1.02]
    at_95 = rounds_interval(ratios)
    speedup, low, high = at_95  # type: ignore[misc]
    logs = np.log(ratios)
    lo, hi = sps.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=sps.sem(logs))
    assert speedup == pytest.approx(math.exp(logs.mean()))
    assert (low, high) == (pytest.approx(math.exp(lo), rel=1e-3), pytest.approx(math.exp(hi), rel=1e-3))
    assert rounds_interval([1.2]) is None  # one round shows no spread
    # Rounds that stopped early report the interval at EARLY_LEVEL; all their rounds run, at FULL_LEVEL.
    lo, hi = sps.t.interval(EARLY_LEVEL, len(logs) - 1, loc=logs.mean(), scale=sps.sem(logs))
    for stop in ("precision", "decided"):
        _, low, high = rounds_interval(ratios, stop)  # type: ignore[misc]
        # t_quantile at 99 % with 3 degrees of freedom: 4.523 for 4.541 (its Cornish-Fisher expansion)
        assert (low, high) == (pytest.approx(math.exp(lo), rel=3e-3), pytest.approx(math.exp(hi), rel=3e-3))
    lo, hi = sps.t.interval(FULL_LEVEL, len(logs) - 1, loc=logs.mean(), scale=sps.sem(logs))
    _, low, high = rounds_interval(ratios, "max_rounds")  # type: ignore[misc]
    assert (low, high) == (pytest.approx(math.exp(lo), rel=3e-3), pytest.approx(math.exp(hi), rel=3e-3))
    assert rounds_interval(ratios, "max_rounds")[1] < at_95[1]  # type: ignore[index]


def test_round_ratios_pair_rounds_by_index() -> None:
    base = [[2.0, 2.2, 2.1], [4.0, 4.0], [1.0]]
    opt = [[1.0, 1.1, 1.05], [2.0, 2.0]]
    assert round_ratios(base, opt) == pytest.approx([2.0, 2.0])  # the shorter side's rounds
    assert round_ratios([[1.0], []], [[1.0], [1.0]]) == [1.0]  # an empty round gives no ratio


def test_a_narrow_interval_twice_settles_on_precision_a_far_one_is_decided_a_wide_one_runs_on() -> None:
    tight = [1.001, 0.999, 1.002, 1.0]
    assert decide(tight, 0.02) == "precision"
    assert decide([1.5, 1.001, 0.999], 0.02) is None  # narrow now, not one round before: one more
    assert decide([2.0, 2.1, 1.95], 0.02) == "decided"  # a slow call's large difference: the fewest rounds
    assert decide([1.1, 1.3, 1.05], 0.02) is None  # beyond 1.0, but not by DECIDED half-widths: more rounds
    assert decide([1.2, 0.8, 1.0], 0.02) is None
    assert half_width(0.98, 1.02) == pytest.approx(0.02, rel=0.01)


def test_an_interval_within_the_noise_band_settles_and_decided_means_beyond_the_band() -> None:
    """With a noise threshold, an interval inside ±threshold is settled at once ("equivalent": no verdict however
    narrow it gets), and "decided" counts its half-widths from the band's edge, not from 1.0."""
    aa = [0.9995, 0.99945, 0.9995]  # two processes of the same code: 0.05 % apart, round after round
    assert decide(aa, 0.02, 0.01) == "equivalent"
    assert decide(aa, 0.02, 0.0) == "decided"  # the plain rule: a "slower" pair
    assert decide([1.0, 1.3, 0.8], 0.02, 0.01) is None  # wide: holds the band and more
    near = [1.012, 1.013, 1.012]  # 1.2 %: beyond 1.0 by many half-widths, beyond 1.01 by fewer than DECIDED
    assert decide(near, 0.02, 0.0) == "decided" and decide(near, 0.02, 0.01) == "precision"
    assert decide([2.0, 2.1, 1.95], 0.02, 0.01) == "decided"


THRESHOLD = BenchmarkConfig.model_fields["noise_threshold"].default  # what the worker gets by default


def _simulate(
    pairs: int, noise: float, true: float, seed: int = 1, draw: str = "normal", threshold: float = THRESHOLD
) -> tuple[list[str | None], list[int], list[bool]]:
    """Pairs whose rounds' log ratios are ``draw`` (normal, or Student t of 3 degrees of freedom: a heavy tail) with
    standard deviation ``noise`` around log(true), run through the stopping rule as the worker runs it (at least 3
    rounds, at most 8, ±2 %, the noise ``threshold``) and the interval compare reports for its stop: each pair's
    verdict under that threshold, its rounds, and whether its interval holds ``true``."""
    rng = np.random.default_rng(seed)

    def ratio() -> float:
        e = rng.normal(0.0, noise) if draw == "normal" else rng.standard_t(3) * noise / math.sqrt(3)
        return true * math.exp(e)

    verdicts, counts, holds = [], [], []
    for _ in range(pairs):
        ratios = [ratio() for _ in range(2)]
        while True:
            ratios.append(ratio())
            stop = "max_rounds" if len(ratios) == 8 else decide(ratios, 0.02, threshold)
            if stop:
                break
        _, low, high = rounds_interval(ratios, stop)  # type: ignore[misc]
        verdict = significance(low, high, threshold)
        verdicts.append(None if verdict == "no significant difference" else verdict)
        counts.append(len(ratios))
        holds.append(low <= true <= high)
    return verdicts, counts, holds


# A 95 % interval's nominal rate plus three binomial standard errors of the 4,000 simulated pairs
# (sqrt(0.05 * 0.95 / 4000) = 0.34 %, so 6.0 %): a rule whose rate is 5 % fails a level once in ~700. Over 10,000
# pairs (seeds 1 and 7) this rule's rate is at most 4.9 % (A/A) and 5.2 % (a true 1.1x outside) at every spread
# with a noise threshold of 0; 2.8 % and 5.4 % with the default ±1 %.
NOMINAL = 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000)
NOISES = [0.003, 0.01, 0.02, 0.03, 0.05, 0.15]


@pytest.mark.parametrize("draw", ["normal", "t3"])
@pytest.mark.parametrize("noise", NOISES)
def test_aa_pairs_read_a_verdict_at_most_as_often_as_a_95_percent_interval_allows(noise, draw) -> None:
    """Stopping on significance inflates false verdicts (each round another look: 15 % and more); this rule stops on
    a width held two rounds, or on a ratio DECIDED half-widths out, and reports an early stop's interval at
    EARLY_LEVEL: an A/A pair reads a verdict in at most ~5 % of pairs whatever the noise (at the 95 % level
    throughout, 7-8 % where the rounds' spread is about the precision). Under the plain rule (a threshold of 0):
    the band only takes verdicts away."""
    verdicts, _, _ = _simulate(4000, noise, 1.0, draw=draw, threshold=0.0)
    wrong = sum(v is not None for v in verdicts) / len(verdicts)
    assert wrong <= NOMINAL, f"{100 * wrong:.1f} % of A/A pairs read a verdict at noise {noise} ({draw})"


@pytest.mark.parametrize("threshold", [0.0, THRESHOLD])
@pytest.mark.parametrize("noise", NOISES)
def test_the_interval_holds_a_true_speedup_as_often_as_it_claims(noise, threshold) -> None:
    """A true 1.1x: a "decided" stop, like a precision one, picks rounds whose spread was small by chance (at the
    95 % level throughout, 7-8 % of intervals missed 1.1 at a spread of 3-5 %); at EARLY_LEVEL at most ~5 %, with
    the noise band's stops and without."""
    _, _, holds = _simulate(4000, noise, 1.1, threshold=threshold)
    missed = 1 - sum(holds) / len(holds)
    assert missed <= NOMINAL, f"{100 * missed:.1f} % of intervals miss a true 1.1x at noise {noise}"


def test_a_difference_within_the_noise_band_is_no_verdict_and_settles_early() -> None:
    """A true 0.5 % with rounds that agree to 0.3 %: under the plain rule a verdict in a quarter of the pairs; under
    the default ±1 % none, most of them settled "equivalent" at the fewest rounds."""
    plain, _, _ = _simulate(500, 0.003, 1.005, threshold=0.0)
    verdicts, counts, _ = _simulate(500, 0.003, 1.005)
    assert sum(v == "faster" for v in plain) > 50 and verdicts == [None] * 500 and np.median(counts) == 3


def test_a_large_difference_is_decided_in_the_fewest_rounds() -> None:
    verdicts, counts, _ = _simulate(500, 0.05, 2.0)
    assert all(v == "faster" for v in verdicts) and np.median(counts) == 3
    verdicts, counts, _ = _simulate(500, 0.05, 1.05)  # a small one takes them all
    assert np.median(counts) == 8


def _timed(tmp_path: Path, name: str, rounds: list[list[float]]) -> object:
    v = variant(tmp_path, name, [torch.ones(4)])
    samples = [x for r in rounds for x in r]
    v.timing = Timing(
        mode="cpu", method="t", samples_ms=samples, stats=summarize(samples), rounds=[len(r) for r in rounds]
    )
    return v


def test_compare_takes_the_interval_over_rounds_and_the_spread_between_them(tmp_path: Path) -> None:
    """Both sides slowed down alike in round 2 (load came and went): each round's ratio is 1, so the pair holds 1.0,
    where the pooled samples of the busy round would have moved one side alone."""
    base = _timed(tmp_path, "baseline", [[1.0, 1.01, 0.99], [3.0, 3.1, 2.9], [1.0, 1.0, 1.02]])
    opt = _timed(tmp_path, "optimized", [[1.0, 0.99, 1.01], [2.95, 2.9, 3.0], [1.01, 1.0, 0.99]])
    c = compare(base, opt)  # type: ignore[arg-type]
    assert c.round_speedups == pytest.approx([1.0, 1.0, 1.0], abs=0.02)
    assert c.speedup_ci_low < 1.0 < c.speedup_ci_high and c.significance == "no significant difference"
    early = compare(base, opt, rounds_stop="precision")  # type: ignore[arg-type]
    assert early.rounds_stop == "precision" and early.speedup == c.speedup
    assert early.speedup_ci_low < c.speedup_ci_low and early.speedup_ci_high > c.speedup_ci_high  # at 98 %
    # Rounds that disagree widen the interval: the spread between them is in it.
    opt_noisy = _timed(tmp_path, "optimized", [[0.5, 0.5, 0.5], [3.0, 3.0, 3.0], [1.0, 1.0, 1.0]])
    wide = compare(base, opt_noisy)  # type: ignore[arg-type]
    assert wide.speedup_ci_high / wide.speedup_ci_low > 2 * c.speedup_ci_high / c.speedup_ci_low
    assert wide.significance == "no significant difference"
    # One round a side: no rounds interval, the samples' bootstrap as before.
    single = compare(
        variant(tmp_path, "baseline", [torch.ones(4)], 2.0), variant(tmp_path, "optimized", [torch.ones(4)])
    )
    assert single.round_speedups == [] and single.speedup == pytest.approx(2.0)
