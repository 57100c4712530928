"""bench/measure/stopping.py with synthetic clocks: deterministic checks of the adaptive stopping rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.measure.stopping import StopRule, relative_noise, rule_for, sample_until


class FakeClock:
    """Each sample advances time by the sample's own duration (plus a fixed overhead)."""

    def __init__(self, samples: list[float], overhead_s: float = 0.0) -> None:
        self.samples = iter(samples)
        self.t = 0.0
        self.overhead_s = overhead_s
        self.taken = 0

    def now(self) -> float:
        return self.t

    def one(self) -> float:
        s = next(self.samples)
        self.t += s / 1e3 + self.overhead_s
        self.taken += 1
        return s


def test_relative_noise_is_robust_standard_error_of_the_median() -> None:
    rng = np.random.default_rng(0)
    x = 100.0 + rng.normal(0, 1.0, 10_000)  # sigma 1 % of the median
    assert relative_noise(x) == pytest.approx(1.2533 * 0.01 / 100, rel=0.05)
    with_outliers = np.concatenate([x, [1e6] * 50])  # 0.5 % outliers barely move a MAD-based scale
    assert relative_noise(with_outliers) == pytest.approx(relative_noise(x), rel=0.05)
    assert math.isinf(relative_noise([1.0]))


def test_quiet_clock_stops_at_min_samples_once_min_time_passed() -> None:
    clock = FakeClock([1.0 + 1e-4 * (i % 3) for i in range(1000)])
    rule = StopRule(noise_target=0.005, min_samples=10, min_seconds=0.02, max_seconds=10)
    m = sample_until(clock.one, None, rule, now=clock.now)
    assert m.stop_reason == "noise_target" and m.target_met
    # 20 samples of 1 ms reach min_seconds=0.02 (first check, met); the next checkpoint (+25 %) confirms.
    assert len(m.samples_ms) == 25


def test_noisy_clock_keeps_sampling_until_the_target() -> None:
    rng = np.random.default_rng(1)
    data = list(1.0 + rng.normal(0, 0.05, 100_000))  # 5 % per-sample noise
    clock = FakeClock(data)
    rule = StopRule(noise_target=0.005, min_samples=10, min_seconds=0.0, max_seconds=1e9)
    m = sample_until(clock.one, None, rule, now=clock.now)
    # SE = 1.2533 * 0.05 / sqrt(n) <= 0.005 needs n >= ~157; checkpoints are 25 % apart
    assert m.stop_reason == "noise_target" and 120 <= len(m.samples_ms) <= 300
    assert m.noise is not None and m.noise <= 0.005


def test_max_time_bounds_an_unreachable_target() -> None:
    rng = np.random.default_rng(2)
    clock = FakeClock(list(10.0 + rng.normal(0, 5.0, 10_000)))  # 50 % noise, 10 ms samples
    rule = StopRule(noise_target=0.0001, min_samples=10, min_seconds=0.0, max_seconds=0.5)
    m = sample_until(clock.one, None, rule, now=clock.now)
    assert m.stop_reason == "max_time" and m.target_met is False
    assert 45 <= len(m.samples_ms) <= 55  # ~0.5 s of 10 ms samples


def test_a_floor_of_samples_outlasts_the_time_ceiling_but_not_the_stage_limit() -> None:
    """A 4 s call under a 4 s ceiling: one sample without a floor; three with ``min_measure_samples`` 3; and never
    past 80 % of the measurement stage's limit, whatever the floor."""
    slow = [4000.0] * 100
    one = FakeClock(slow)
    m = sample_until(one.one, None, StopRule(min_seconds=0.0, max_seconds=4.0), now=one.now)
    assert m.stop_reason == "max_time" and len(m.samples_ms) == 1
    three = FakeClock(slow)
    m = sample_until(three.one, None, StopRule(min_seconds=0.0, max_seconds=4.0, floor=3), now=three.now)
    assert m.stop_reason == "max_time" and len(m.samples_ms) == 3
    cut = FakeClock(slow)
    rule = StopRule(min_seconds=0.0, max_seconds=4.0, floor=50, limit_seconds=10.0)
    m = sample_until(cut.one, None, rule, now=cut.now)
    assert m.stop_reason == "max_time" and len(m.samples_ms) == 3  # 12 s > the 10 s limit


def test_rule_for_carries_the_floor_and_the_stage_limit() -> None:
    from bench.define.config import BenchmarkConfig

    rule = rule_for(BenchmarkConfig(max_measure_seconds=4.0, min_measure_samples=3, measurement_timeout_seconds=120.0))
    assert (rule.max_seconds, rule.floor, rule.limit_seconds) == (4.0, 3, 96.0)
    assert rule_for(BenchmarkConfig()).floor == 1


def test_fixed_iterations_win_over_the_rule() -> None:
    clock = FakeClock([1.0] * 100)
    m = sample_until(clock.one, 7, StopRule(min_samples=50), now=clock.now)
    assert len(m.samples_ms) == 7 and m.stop_reason == "fixed_iterations" and m.target_met is None


def test_config_stop_rule_stays_inside_the_measurement_limit() -> None:
    from bench.define.config import resolve_config

    cfg = resolve_config({"measurement_timeout_seconds": 1.0, "max_measure_seconds": 5.0, "noise_target": 0.01})
    rule = rule_for(cfg)
    assert rule.max_seconds == pytest.approx(0.8) and rule.noise_target == 0.01


@pytest.mark.parametrize("seed", range(20))
def test_no_premature_stop_on_lucky_small_samples(seed: int) -> None:
    """Sequential checks must not stop far before the noise truly reaches the target."""
    rng = np.random.default_rng(100 + seed)
    clock = FakeClock(list(1.0 + rng.normal(0, 0.05, 100_000)))
    rule = StopRule(noise_target=0.005, min_samples=10, min_seconds=0.0, max_seconds=1e9)
    m = sample_until(clock.one, None, rule, now=clock.now)
    true_se = 1.2533 * 0.05 / math.sqrt(len(m.samples_ms))
    assert true_se <= 0.005 * 1.6, f"stopped at n={len(m.samples_ms)}, true noise {true_se:.4f}"
