"""perflab sweep run's exit status (sweeps/cli.py, Conclusion.failure in sweeps/conclude.py): 1 with one line saying
why where the sweep has no answer (no trial ran ok, or the pick ran ok in none of its verification repeats), 0 where
it has one, keeping your configuration included. The trials are a stand-in ``evaluate`` (no trial processes)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sweeps.data import make_data
from sweeps.trial import TrialOutcome

QUICK = Path(__file__).parent / "fixtures" / "quick.yaml"  # no ranking re-runs, no probe


def ok(sps: float) -> TrialOutcome:
    return TrialOutcome("ok", {"samples_per_s": sps, "memory_pct": 1.0, "peak_memory_gb": 0.1})


def invoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trial: Callable[[dict[str, Any], int], TrialOutcome],
           repeats: int = 3) -> Any:  # fmt: skip
    """``perflab sweep run`` over batch 16 and 32 (AMP off and on) with ``trial(params, n)`` as every run of a
    configuration (``n``: that configuration's runs before this one)."""
    from typer.testing import CliRunner

    import sweeps.runner
    from perflab.cli import app

    runs: dict[tuple[Any, ...], int] = {}

    def evaluate(params: dict[str, Any], should_prune: Any = None, **_: Any) -> TrialOutcome:
        key = (params["batch_size"], params["num_workers"], params["amp"])
        runs[key] = runs.get(key, 0) + 1
        return trial(params, runs[key] - 1)

    monkeypatch.setattr(sweeps.runner, "sweep", functools.partial(sweeps.runner.sweep, evaluate=evaluate))
    data = make_data(tmp_path / "d.h5", 300, 16).path
    args = ["sweep", "run", "--workload", "tiny", "--data-path", data, "--batch-sizes", "16,32", "--num-workers", "0",
            "--verify-repeats", str(repeats), "--no-track", "--storage", f"sqlite:///{tmp_path / 'o.db'}",
            "--config", str(QUICK)]  # fmt: skip
    return CliRunner().invoke(app, args, env={"COLUMNS": "80"})


def closing(output: str) -> str:
    """The sweep's last sentence, its lines (wrapped at 80 columns, each within them) joined."""
    lines = output.strip().splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    start = max(i for i, line in enumerate(lines) if line.startswith("sweep failed"))
    return " ".join(line.strip() for line in lines[start:])


def test_a_sweep_whose_trials_all_timed_out_exits_1_saying_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Timeouts are not the failed trials that stop a sweep early as a broken workload (exit status 2): the sweep ran
    to its end with nothing measured, and exited 0 all the same."""
    res = invoke(tmp_path, monkeypatch, lambda p, n: TrialOutcome("timeout", error="past its 300 s"))
    assert res.exit_code == 1, res.output
    last = closing(res.output)
    assert last == ("sweep failed (exit status 1): nothing to recommend: no trial finished ok (4 timeout); trial 0 "
                    "(bs=32 w=0) timeout: past its 300 s"), last  # fmt: skip


def test_a_pick_that_ran_in_no_verification_repeat_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch 16 read 2x once, then failed every time it ran again: the yaml keeps your configuration, but nothing
    measured the pick a second time."""

    def trial(p: dict[str, Any], n: int) -> TrialOutcome:
        if p["batch_size"] == 16 and not p["amp"]:
            return ok(2000.0) if n == 0 else TrialOutcome("failed", error="RuntimeError: boom")
        return ok(1000.0 + n)

    res = invoke(tmp_path, monkeypatch, trial, repeats=2)
    assert res.exit_code == 1, res.output
    assert closing(res.output) == ("sweep failed (exit status 1): the sweep's pick (bs=16 w=0) ran ok "
                                                   "in none of its 2 verification repeats (failed)")  # fmt: skip


def test_keeping_your_configuration_is_an_answer_exit_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch 16 read 2x in its trial and ties with your batch 32 in the verification (no gain beyond noise): keep
    yours, exit status 0; so too where your configuration is itself the fastest (nothing to verify)."""
    wobble = itertools.cycle([1.0, 1.012, 0.991, 1.003, 0.995, 1.008])

    def tied(p: dict[str, Any], n: int) -> TrialOutcome:
        lucky = p["batch_size"] == 16 and not p["amp"] and n == 0
        return ok(2000.0 if lucky else 1000.0 * next(wobble))

    res = invoke(tmp_path / "tied", monkeypatch, tied)
    assert res.exit_code == 0, res.output
    assert "keep your configuration (bs=32 w=0), below" in res.output and "sweep failed" not in res.output
    yours = invoke(tmp_path / "yours", monkeypatch, lambda p, n: ok(3000.0 if p["batch_size"] == 32 and not p["amp"]
                                                                   else 1000.0))  # fmt: skip
    assert yours.exit_code == 0, yours.output
    assert "keep your configuration (bs=32 w=0): it is the sweep's pick" in yours.output, yours.output
    assert "sweep failed" not in yours.output
