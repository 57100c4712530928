"""The host CPU's speed, read with a fixed reference: a pure-Python integer loop of about 0.5-1 ms, timed.

A launch-bound call (a small kernel, a token generation's decode step) runs at the speed of the host CPU that
launches it, and that speed can change under a guest that sees nothing of it: on the H200 host a fixed Python loop
took 13.9 ms in most 5-10 s windows and 20-27 ms in others, with no steal time and the SM clock steady, and a
launch-bound generation's time tracked it (correlation 0.77). Other processes' CPU time (``bench.measure.cores``)
does not show it. So the timed child reads this reference right before and right after its measurement
(``Timing.host_ref_ms``), and a variant measured in rounds names a round whose reference ran slow
(``slow_rounds_note``): that round is in the interval, and the note says why its spread may be wide. A
token-generating variant's clock also reads it right after each measured generation (``Timing.host_ref_during_ms``),
kept for analysis (scripts/timing/host_rounds.py).

The loop allocates nothing that lasts (small ints only); the best of three runs is kept, so one preemption does
not read as a slow host.
"""

from __future__ import annotations

import math

LOOP = 12_000  # iterations of the reference loop: ~0.85 ms on the 2-core CI host, less on a faster core
RUNS = 3  # the best of these
HOST_SLOW = 1.3  # a round whose reference ran this many times its variant's fastest round's is named


def _work(n: int) -> int:
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFF
    return x


def _now() -> float:
    from bench.measure.guard import BOUND  # the clock as bound before any benchmark code ran

    return BOUND.perf_counter()


def reference_ms(loop: int | None = None, runs: int = RUNS) -> float:
    """Milliseconds the fixed reference loop takes on this host now: the best of ``runs``."""
    n = LOOP if loop is None else loop
    best = math.inf
    for _ in range(runs):
        t0 = _now()
        _work(n)
        best = min(best, _now() - t0)
    return best * 1e3


def slow_rounds_note(readings: list[list[float]], numbers: list[int] | None = None) -> str | None:
    """The note of a variant's rounds (``readings``: each round's [before, after] reference, ``numbers``: the
    rounds' numbers, in order) where a round's reading (the slower of its two) is at least ``HOST_SLOW`` times the
    fastest round's; None where none is, or fewer than two rounds have readings."""
    numbers = list(range(len(readings))) if numbers is None else numbers
    worst = {n: max(r) for n, r in zip(numbers, readings, strict=False) if r and min(r) > 0}
    if len(worst) < 2:
        return None
    fastest = min(worst.values())
    slow = {n: ms / fastest for n, ms in worst.items() if ms >= HOST_SLOW * fastest}
    if not slow:
        return None
    which = f"round {next(iter(slow))}" if len(slow) == 1 else f"rounds {', '.join(map(str, slow))}"
    ratios = ", ".join(f"{r:.2f}×" for r in slow.values())
    return (
        f"host CPU slow in {which}: a fixed CPU reference ran {ratios} its fastest of these rounds (a launch-bound "
        f"call runs at the host CPU's speed; the {'round is' if len(slow) == 1 else 'rounds are'} in the interval)"
    )
