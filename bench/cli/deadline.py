"""``perflab run --suite-timeout SECONDS``: the suite's wall time, from the command's start, after which it stops.

The suite stops as on Ctrl-C (its children killed, what finished kept): ``SuiteTimeout`` is a ``KeyboardInterrupt``
raised in the main thread by an alarm (SIGALRM), so every path that ends a suite on a signal ends it here too, and
a wait in a system call is cut short. An alarm that was set before (pytest-timeout's) gets its handler back and
goes on with the time it had left.
"""

from __future__ import annotations

import math
import signal
import time
from types import FrameType, TracebackType
from typing import Any

from bench.errors import PerflabError

__all__ = ["SuiteDeadline", "SuiteTimeout", "check_suite_timeout"]


class SuiteTimeout(KeyboardInterrupt):
    """The suite's time (``--suite-timeout``) ran out."""


def check_suite_timeout(seconds: float | None) -> float | None:
    """``--suite-timeout``'s value, or a PerflabError naming it: a finite number of seconds > 0."""
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise PerflabError(f"--suite-timeout {seconds}: expected the suite's wall time in seconds, > 0 (e.g. 1800)")
    return seconds


class SuiteDeadline:
    """``with SuiteDeadline(seconds, spent_s):`` raises ``SuiteTimeout`` in the main thread ``seconds`` after the
    command started (``spent_s`` of them already gone); ``fired`` says whether it did. ``seconds=None``: none."""

    def __init__(self, seconds: float | None, spent_s: float | None = None) -> None:
        self.seconds = seconds
        self.remaining = None if seconds is None else max(seconds - (spent_s or 0.0), 1e-3)
        self.fired = False
        self._armed = False
        self._t0 = 0.0
        self._old_handler: Any = None
        self._old_timer = (0.0, 0.0)

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        if self._armed:  # not once the suite is over: an alarm already on its way does nothing
            self._armed = False
            self.fired = True
            raise SuiteTimeout(f"the suite's time ran out (--suite-timeout {self.seconds:g} s)")

    def __enter__(self) -> SuiteDeadline:
        if self.remaining is not None:
            self._t0 = time.monotonic()
            self._old_handler = signal.signal(signal.SIGALRM, self._fire)
            self._armed = True
            self._old_timer = signal.setitimer(signal.ITIMER_REAL, self.remaining)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.remaining is None:
            return
        self._armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._old_handler if self._old_handler is not None else signal.SIG_DFL)
        delay, interval = self._old_timer
        if delay > 0:  # an earlier alarm goes on with the time it had left (at least a moment)
            signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - self._t0), 1e-3), interval)
