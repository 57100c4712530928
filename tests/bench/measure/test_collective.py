"""bench/measure/collective.py: the ranks' clocks decide from numbers every rank shares.

A second rank is simulated in this process (the gathers and the broadcast replaced): its times and rank 0's
clock are whatever the test says, so a decision taken from this process's own clock or samples shows. The real
ranks, as gloo processes, are in tests/bench/isolate/test_ranks.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import torch

from bench.measure.collective import RanksHostClock
from bench.measure.guard import BOUND
from bench.measure.stopping import StopRule


@pytest.fixture
def rank0_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Rank 0's clock advances 0.2 s a sample; rank 1 takes 3x as long as this process for each call, plus 1 ms."""
    BOUND.bind_torch()
    ticks = itertools.count(start=1000.2, step=0.2)
    seen: list[float] = []

    def all_gather(parts: list[torch.Tensor], sent: torch.Tensor, group: object = None) -> None:
        mine = float(sent[0])
        parts[0].copy_(torch.tensor([mine, next(ticks)], dtype=torch.float64))
        # a millionth more each call: on a host whose clock reads a no-op call as identical ticks, rank 1's samples
        # must still differ, or their noise is 0 and sampling stops on its target, not on rank 0's clock
        parts[1].copy_(torch.tensor([3 * mine + 1.0 + 1e-6 * len(seen), 0.0], dtype=torch.float64))
        seen.append(mine)

    monkeypatch.setattr(BOUND, "all_gather", all_gather, raising=False)
    monkeypatch.setattr(BOUND, "broadcast", lambda t, src, group=None: t.fill_(1000.0), raising=False)
    monkeypatch.setattr(BOUND, "barrier", lambda group=None: None, raising=False)
    yield seen


def test_sampling_stops_on_rank_0s_clock_and_keeps_the_slowest_rank(rank0_clock: list[float]) -> None:
    clock = RanksHostClock(2, None, 0.0, 5.0)
    rule = StopRule(noise_target=1e-9, min_samples=2, min_seconds=0.0, max_seconds=1.0)
    m = clock.measure(lambda: None, None, rule)
    # 1.0 s of rank 0's clock is 5 samples, though this process took microseconds
    assert m.stop_reason == "max_time" and len(m.samples_ms) == 5
    assert clock.rank_samples_ms is not None and clock.rank_samples_ms[0] == rank0_clock
    assert m.samples_ms == clock.rank_samples_ms[1] == [3 * t + 1.0 + 1e-6 * i for i, t in enumerate(rank0_clock)]


def test_warm_up_lasts_by_rank_0s_clock(rank0_clock: list[float]) -> None:
    clock = RanksHostClock(2, None, 1.0, 2.0)  # at least 1 s of warm-up (5 of rank 0's samples), then steady
    clock.warmup(lambda: None, 1)
    # steady (two windows of 5 alike) as soon as possible: by this process's clock 1 s would not have passed
    assert clock.warmup_done == 10 and len(rank0_clock) == 10 and clock.stable
    assert clock.eager_ms is not None and clock.eager_ms >= 1.0  # the slowest rank's calls


def test_the_batch_samples_as_long_as_the_rank_that_allows_longest(
    rank0_clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's rule comes from each rank's own wall time of its measurement (``batch_rule(cold_s)``); rank 1
    allowed 1.0 s where this rank allowed 0.4 s. Sampling on this rank's own limit would stop two samples before
    rank 1 does, and rank 1 would wait for them in its next gather: a hang until the stage's limit."""
    other = {"min_seconds": 0.0, "max_seconds": 1.0}

    def all_reduce(t: torch.Tensor, op: object = None, group: object = None) -> None:
        assert op == torch.distributed.ReduceOp.MAX
        t.copy_(torch.maximum(t, torch.tensor([other["min_seconds"], other["max_seconds"]], dtype=torch.float64)))

    monkeypatch.setattr(BOUND, "all_reduce", all_reduce, raising=False)
    clock = RanksHostClock(2, None, 0.0, 5.0)
    own = StopRule(noise_target=1e-9, min_samples=2, min_seconds=0.0, max_seconds=0.4)
    batch = clock.measure_batch(lambda: None, 0.5, own)
    assert batch is not None and batch.stop_reason == "max_time"
    assert len(batch.samples_ms) == 5  # 1.0 s of rank 0's clock (0.2 s a sample), as on rank 1
