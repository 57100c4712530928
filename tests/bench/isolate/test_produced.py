"""bench/isolate/produced.py: the rounds of get_output()'s cost go on while it looks like work, within a budget."""

from __future__ import annotations

import threading
import time

import torch

from bench.isolate.produced import MORE_ROUNDS, ROUNDS, THREAD_LOOKS, check_produced
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


class _Threaded:
    """Its output made on a thread of its own. ``waits``: the call joins the thread before it returns (honest), or
    (a fake) only on its first call, as a loaded host's scheduler may let a fake's thread finish first."""

    def __init__(self, waits: bool) -> None:
        self.y, self.waits, self.calls = torch.zeros(4), waits, 0

    def benchmark_fn(self) -> None:
        self.calls += 1

        def work() -> None:
            time.sleep(0.005)
            self.y.copy_(torch.arange(4.0))

        t = threading.Thread(target=work)
        t.start()
        if self.waits or self.calls == 1:
            t.join()


def test_a_call_that_starts_threads_is_looked_at_again_until_one_look_finds_them_left_running() -> None:
    cpu = torch.device("cpu")
    fake = _Threaded(waits=False)
    # its first call (the first look's) joins its thread, as a scheduler may let a fake's thread finish first
    found = check_produced(fake, fake.benchmark_fn, cpu, 1.0, {})
    assert found["threads_left"] == 1 or found["settled"] is False, found
    assert fake.calls == 2  # the first look found it settled, the second did not
    honest = _Threaded(waits=True)
    found = check_produced(honest, honest.benchmark_fn, cpu, 1.0, {})
    assert found["settled"] and found["threads_left"] == 0 and "started" not in found
    assert honest.calls == THREAD_LOOKS  # looked at as often as allowed, settled each time
