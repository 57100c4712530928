"""bench/isolate/produced.py: the rounds of get_output()'s cost go on while it looks like work, within a budget."""

from __future__ import annotations

import time

import torch

from bench.isolate.produced import MORE_ROUNDS, ROUNDS, check_produced


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
