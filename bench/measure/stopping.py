"""When to stop sampling: a noise target on the estimate, with a floor and a ceiling on effort.

Modelled on nvbench's stdrel criterion, applied to the *estimate* rather than to single samples:
the harness reports the median, so it keeps sampling until the relative standard error of the
median is below ``noise_target``. The spread is estimated robustly (1.4826 × MAD, the normal-
consistent scale; a few outliers from an interrupt do not inflate it), and the standard error of
the median is 1.2533 × σ / √n (its asymptotic value for normal data).

Pure functions of the samples and the elapsed time, so tests drive them with synthetic clocks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.define.config import BenchmarkConfig


def relative_noise(samples_ms: Sequence[float]) -> float:
    """Relative standard error of the median of ``samples_ms`` (inf for fewer than 2 samples)."""
    if len(samples_ms) < 2:
        return math.inf
    import numpy as np  # here, not at import: the CLI's start-up imports this module (numpy: ~0.2 s there)

    x = np.asarray(samples_ms, dtype=np.float64)
    median = float(np.median(x))
    if median <= 0:
        return math.inf
    sigma = 1.4826 * float(np.median(np.abs(x - median)))
    if sigma == 0.0:  # discrete clocks: fall back to the sample std so identical ticks are not "noise-free"
        sigma = float(x.std(ddof=1))
    return 1.2533 * sigma / math.sqrt(x.size) / median


@dataclass(frozen=True)
class StopRule:
    noise_target: float = 0.005  # relative standard error of the median
    min_samples: int = 10
    min_seconds: float = 0.1  # keep sampling at least this long (clock warm-up, boost settling)
    max_seconds: float = 1.0  # give up on the target after this long
    max_samples: int = 1_000_000
    floor: int = 1  # samples before max_seconds may stop the sampling (``min_measure_samples``)
    limit_seconds: float = math.inf  # stops it whatever the floor (80 % of the measurement stage's limit)
    # The target is checked at checkpoints n = min_samples, then 25 % more samples each time, and
    # must hold at two consecutive checkpoints: checking after every sample would stop on the first
    # lucky draw (a 10-sample MAD can be 4x too small), a multiple-testing bias towards flattering noise.
    growth: float = 1.25


def rule_for(config: BenchmarkConfig) -> StopRule:
    """``config``'s adaptive stopping rule, its time ceiling kept inside the measurement stage's limit."""
    limit = 0.8 * config.stage_limit("measurement")
    ceiling = min(config.max_measure_seconds, limit)
    return StopRule(
        noise_target=config.noise_target,
        min_samples=config.min_samples,
        min_seconds=min(config.min_measure_seconds, ceiling),
        max_seconds=ceiling,
        floor=config.min_measure_samples,
        limit_seconds=limit,
    )


@dataclass
class Measurement:
    samples_ms: list[float]
    stop_reason: str  # "fixed_iterations", "noise_target", "max_time", "max_samples" or a timer's own
    noise: float | None = None  # relative standard error of the median reached
    noise_target: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def target_met(self) -> bool | None:
        if self.noise_target is None or self.noise is None:
            return None
        return self.noise <= self.noise_target


def sample_until(
    one: Callable[[], float],
    iterations: int | None,
    rule: StopRule,
    now: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Call ``one()`` (one sample, ms) a fixed number of times, or until ``rule`` says stop."""
    samples: list[float] = []
    if iterations is not None:
        samples = [one() for _ in range(iterations)]
        return Measurement(samples, "fixed_iterations", relative_noise(samples) if iterations > 1 else None)
    t0 = now()
    checkpoint, met_before = rule.min_samples, False
    while True:
        samples.append(one())
        n, elapsed = len(samples), now() - t0
        reason = None
        if n >= rule.max_samples:
            reason = "max_samples"
        elif elapsed >= rule.limit_seconds or (elapsed >= rule.max_seconds and n >= rule.floor):
            reason = "max_time"
        elif n >= checkpoint and elapsed >= rule.min_seconds:
            met = relative_noise(samples) <= rule.noise_target
            if met and met_before:
                reason = "noise_target"
            met_before = met
            checkpoint = max(n + 1, math.ceil(n * rule.growth))
        if reason is not None:
            return Measurement(samples, reason, relative_noise(samples), rule.noise_target)
