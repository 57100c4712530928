"""bench/isolate/produced.py: the rounds of get_output()'s cost go on while it looks like work, within a budget."""

from __future__ import annotations

import time

import torch

from bench.isolate.produced import MORE_ROUNDS, ROUNDS, check_produced
from bench.measure.judge import get_output_works


class _Deferred:
    """An output finished in get_output() (2 ms of work there, 1 ms in the call)."""

    def __init__(self) -> None:
        self.y = torch.zeros(4)

    def benchmark_fn(self) -> None:
        time.sleep(0.001)

    def get_output(self) -> torch.Tensor:
        time.sleep(0.002)
        self.y.fill_(1.0)
        return self.y


def test_get_output_rounds_go_on_while_it_looks_like_work_and_stop_at_the_budget() -> None:
    obj = _Deferred()
    cpu = torch.device("cpu")
    unbounded = check_produced(obj, obj.benchmark_fn, cpu, 1.0, {})
    assert len(unbounded["alone_ms"]) == ROUNDS + MORE_ROUNDS  # work each round: every round it may take
    assert unbounded["get_output_ms"] > 1.0
    spent = check_produced(obj, obj.benchmark_fn, cpu, 1.0, {}, budget_s=0.0)
    assert len(spent["alone_ms"]) == ROUNDS  # the least are always run; no more begun past the budget
    assert spent["get_output_ms"] > 1.0  # what the rounds there are show, for the parent to judge


class _SlowedOnce(_Deferred):
    """An honest get_output() that a busy host slowed through the first set of rounds only (2 ms each of its first
    ROUNDS + MORE_ROUNDS calls, nothing after): the slices of a scheduler, not work of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def get_output(self) -> torch.Tensor:
        self.calls += 1
        if self.calls <= ROUNDS + MORE_ROUNDS:
            time.sleep(0.002)
        return self.y


def test_rounds_that_find_work_are_taken_again_and_the_last_set_judged() -> None:
    cpu = torch.device("cpu")
    slowed = _SlowedOnce()
    found = check_produced(slowed, slowed.benchmark_fn, cpu, 1.0, {})
    assert slowed.calls > ROUNDS + MORE_ROUNDS  # the first set looked like work: a second set was taken
    assert not get_output_works(found["alone_ms"], found["with_get_ms"], decide=True)
    deferred = _Deferred()  # work of its own: both sets find it
    found = check_produced(deferred, deferred.benchmark_fn, cpu, 1.0, {})
    assert get_output_works(found["alone_ms"], found["with_get_ms"], decide=True)
