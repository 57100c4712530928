"""bench/cli/deadline.py: ``--suite-timeout``'s alarm: it stops the work in the main thread, a wait in a system call
included, and leaves an alarm set before it (pytest-timeout's) as it found it."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.cli.deadline import SuiteDeadline, SuiteTimeout, check_suite_timeout
from bench.errors import PerflabError


def test_the_alarm_cuts_a_blocking_wait_short_and_says_why() -> None:
    t0 = time.monotonic()
    deadline = SuiteDeadline(0.5)
    with pytest.raises(SuiteTimeout, match=r"--suite-timeout 0.5 s"):
        with deadline:
            subprocess.run(["sleep", "30"])  # waitpid: a system call, cut short by the alarm
    assert deadline.fired and time.monotonic() - t0 < 10
    assert isinstance(SuiteTimeout(), KeyboardInterrupt)  # every path that ends a suite on a signal ends it here


def test_the_time_already_spent_counts() -> None:
    t0 = time.monotonic()
    with pytest.raises(SuiteTimeout), SuiteDeadline(30.0, spent_s=29.8):
        time.sleep(20)
    assert time.monotonic() - t0 < 10


def test_a_suite_that_ends_in_time_leaves_the_earlier_alarm_as_it_was() -> None:
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with SuiteDeadline(60.0) as deadline:
            time.sleep(0.2)
        assert not deadline.fired and not fired
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0.3 < left <= 0.81  # the earlier alarm goes on with the time it had left
        time.sleep(1.0)
        assert fired == [signal.SIGALRM]  # ... and its own handler takes it
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_no_timeout_sets_no_alarm() -> None:
    before, timer = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)[0]
    with SuiteDeadline(None) as deadline:
        assert signal.getsignal(signal.SIGALRM) is before  # pytest-timeout's, if any: its timer runs on
        assert signal.getitimer(signal.ITIMER_REAL)[0] <= timer
    assert not deadline.fired


@pytest.mark.parametrize("bad", [0.0, -5.0, float("inf"), float("nan")])
def test_a_bad_value_is_one_line_naming_it(bad: float) -> None:
    with pytest.raises(PerflabError, match=r"--suite-timeout .*: expected the suite's wall time in seconds, > 0"):
        check_suite_timeout(bad)
    assert check_suite_timeout(1800.0) == 1800.0 and check_suite_timeout(None) is None


def test_the_rest_is_a_command_that_runs_as_given() -> None:
    """The command that runs what a stopped suite left names where the targets are: the ``--chapters-dir`` they came
    from, or for ``perflab ab`` its files (an ab pair has no target ``perflab run`` could find)."""
    from bench.cli.report import rest_command
    from bench.define.discovery import Example
    from bench.define.result import VariantSpec

    def example(chapter: str, name: str, paths: list[str]) -> Example:
        specs = [VariantSpec(chapter=chapter, example=name, variant=v, path=p)
                 for v, p in zip(["baseline", "optimized", "optimized_b"], paths, strict=False)]  # fmt: skip
        return Example(chapter, name, baseline=specs[0], optimized=specs[1:])

    done = {"ch01:a:baseline", "ch01:a:optimized"}
    mine = [example("ch01", "a", ["/m/ch01/baseline_a.py", "/m/ch01/optimized_a.py"]),
            example("ch01", "b", ["/m/ch01/baseline_b.py", "/m/ch01/optimized_b.py"])]  # fmt: skip
    assert rest_command(mine, done, Path("/m")) == "perflab run -t ch01:b --chapters-dir /m"
    assert rest_command(mine, done) == "perflab run -t ch01:b"
    assert rest_command(mine[:1], done, Path("/m")) == ""
    ab = [example("ab", "ref", ["/u/ref.py", "/u/my cand.py", "/u/c2.py"])]
    assert rest_command(ab, {"ab:ref:baseline"}) == "perflab ab /u/ref.py '/u/my cand.py' /u/c2.py"
    # the stopped command's options, repeated: the rest is measured as its suite was, quoted for a shell
    again = ["--device", "cpu", "--config", "my suite.yaml", "--rounds", "3"]
    assert rest_command(mine, done, Path("/m"), again) == (
        "perflab run -t ch01:b --chapters-dir /m --device cpu --config 'my suite.yaml' --rounds 3")  # fmt: skip
    assert rest_command(mine, done, None, ["--chapters-dir", "/m", "--no-track"]) == (
        "perflab run -t ch01:b --chapters-dir /m --no-track")  # fmt: skip
    assert rest_command(ab, {"ab:ref:baseline"}, None, ["--jobs", "2"]) == (
        "perflab ab /u/ref.py '/u/my cand.py' /u/c2.py --jobs 2")  # fmt: skip
