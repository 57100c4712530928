"""bench/measure/hostspeed.py: the host CPU's speed reference read around a measurement, and the note of a variant's
round whose reference ran slow (bench/isolate/merged.py pools the rounds' readings)."""

from __future__ import annotations

import pytest

from bench.measure import hostspeed


class FakeHost:
    """A clock that the reference loop advances by ``per_step_ms`` per iteration times the host's ``slowdown``; the
    runs listed in ``preempted`` take 10x as long (one preemption)."""

    def __init__(self, slowdown: float = 1.0, preempted: tuple[int, ...] = ()) -> None:
        self.now, self.slowdown, self.preempted, self.runs, self.loops = 0.0, slowdown, preempted, 0, []

    def work(self, n: int) -> int:
        self.loops.append(n)
        self.now += n * 50e-9 * self.slowdown * (10.0 if self.runs in self.preempted else 1.0)
        self.runs += 1
        return 0


def _fake(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    monkeypatch.setattr(hostspeed, "_work", host.work)
    monkeypatch.setattr(hostspeed, "_now", lambda: host.now)


def test_the_reference_is_a_positive_time_of_the_fixed_loop() -> None:
    ms = hostspeed.reference_ms()
    assert 0.0 < ms < 1e3  # a few ms at most even on a busy host; the loop's iterations are the module's LOOP
    assert hostspeed._work(hostspeed.LOOP) == hostspeed._work(hostspeed.LOOP)  # a fixed workload


def test_a_slower_host_reads_a_slower_reference_in_proportion(monkeypatch: pytest.MonkeyPatch) -> None:
    calm, slow = FakeHost(), FakeHost(slowdown=1.6)
    _fake(monkeypatch, calm)
    calm_ms = hostspeed.reference_ms()
    _fake(monkeypatch, slow)
    assert hostspeed.reference_ms() == pytest.approx(1.6 * calm_ms)
    assert calm_ms == pytest.approx(hostspeed.LOOP * 50e-9 * 1e3) and calm.loops == [hostspeed.LOOP] * 3
    big = FakeHost()
    monkeypatch.setattr(hostspeed, "LOOP", 2 * hostspeed.LOOP)  # more work: more time, same host
    _fake(monkeypatch, big)
    assert hostspeed.reference_ms() == pytest.approx(2 * calm_ms)


def test_the_best_of_three_runs_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """One preempted run does not read as a slow host; three do."""
    _fake(monkeypatch, FakeHost())
    calm_ms = hostspeed.reference_ms()
    _fake(monkeypatch, FakeHost(preempted=(0, 2)))
    assert hostspeed.reference_ms() == pytest.approx(calm_ms)
    _fake(monkeypatch, FakeHost(preempted=(0, 1, 2)))
    assert hostspeed.reference_ms() == pytest.approx(10 * calm_ms)


def test_a_slow_round_is_named_with_its_ratio_and_calm_rounds_are_not() -> None:
    note = hostspeed.slow_rounds_note([[1.0, 1.05], [0.98, 1.0], [1.0, 1.6], [1.1, 1.2]])
    assert note == (
        "host CPU slow in round 2: a fixed CPU reference ran 1.60× its fastest of these rounds (a launch-bound call "
        "runs at the host CPU's speed; the round is in the interval)"
    )
    assert hostspeed.slow_rounds_note([[1.0, 1.05], [1.0, 1.29], [1.2, 1.1]]) is None  # all within 1.3x
    assert hostspeed.slow_rounds_note([[1.0, 1.0]]) is None and hostspeed.slow_rounds_note([[], [1.0, 2.0]]) is None
    # rounds left out of the pooled timing keep their own numbers; several slow rounds: one note
    both = hostspeed.slow_rounds_note([[1.0, 1.0], [1.5, 1.0], [2.0, 1.0]], [0, 2, 3])
    assert both is not None and both.startswith("host CPU slow in rounds 2, 3: a fixed CPU reference ran 1.50×, 2.00×")
    assert both.endswith("the rounds are in the interval)")
