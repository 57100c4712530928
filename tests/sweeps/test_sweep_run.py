"""Real isolated trials (tiny built-in, CPU): a 2x2 grid into MLflow, the simulated memory wall, a timeout."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from bench.errors import ConfigError
from sweeps.config import SweepConfig
from sweeps.data import make_data
from sweeps.measure import measure
from sweeps.runner import job_for, sweep
from sweeps.storage import default_storage
from sweeps.trial import run_trial
from sweeps.workload import parse_workload

QUICK = Path(__file__).parent / "fixtures" / "quick.yaml"  # no ranking re-runs, no probe


def tiny_job(data: str, batch_size: int, num_workers: int = 0, **kw: object) -> object:
    """The tiny built-in's trial job for one configuration (CPU, smoke size)."""
    cfg = SweepConfig(workload="tiny", **kw)  # type: ignore[arg-type]
    params = {"batch_size": batch_size, "num_workers": num_workers, "amp": False, "pin_memory": False,
              "grad_accum": 1, "channels_last": False, "compile": False, "prefetch_factor": 2,
              "persistent_workers": True}  # fmt: skip
    return job_for(cfg, parse_workload("tiny"), data, cuda=False, smoke=True, params=params)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_data(tmp_path_factory.mktemp("data") / "d.h5", 2000, 16).path


@pytest.mark.slow  # a 2x2 grid's four trials (~15 s); the tiers' other sweep tests run trials and log them
def test_grid_2x2_completes_and_logs_nested_runs(data: str, tmp_path: Path, mlflow_uri: str) -> None:
    uri = mlflow_uri
    overrides = {"preset": "tiny", "batch_sizes": "16,32", "num_workers_options": "0,1", "steps_per_test": 3,
                 "warmup_steps": 1, "device": "cpu", "test_mixed_precision": False,
                 "test_pin_memory": False, "verify_repeats": 0, "rank_rounds": 0, "probe": False}  # fmt: skip
    result = sweep(data_path=data, out=tmp_path / "out", overrides=overrides, echo=lambda _: None)
    rec, rows = result.recommendation, result.rows
    assert sorted((r["batch_size"], r["num_workers"], r["status"]) for r in rows) == [
        (16, 0, "ok"), (16, 1, "ok"), (32, 0, "ok"), (32, 1, "ok")]  # fmt: skip
    for r in rows:
        assert r["samples_per_s"] > 0 and r["forward_ms"] > 0 and r["backward_ms"] > 0 and r["optimizer_ms"] > 0
        assert r["step_ms"] >= r["io_wait_ms"] and r["peak_memory_gb"] > 0
        # what isolation costs beyond warm-up + measured steps, and its split, from both processes' clocks
        assert 0 < r["steps_time_s"] < r["trial_wall_s"] < 60
        assert r["overhead_s"] == pytest.approx(r["trial_wall_s"] - r["steps_time_s"])
        parts = (r["startup_s"], r["setup_s"], r["teardown_s"])
        assert min(parts) >= 0 and sum(parts) == pytest.approx(r["overhead_s"])
        assert r["steps_time_s"] >= 3 * r["step_ms"] / 1e3  # the measured steps are inside the span
    assert rec.recommended is not None
    assert (tmp_path / "out" / "results.csv").read_text().count("\n") == 5
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("Default").experiment_id])
    parents = [r for r in runs if r.data.tags.get("perflab.kind") == "sweep"]
    trials = [r for r in runs if r.data.tags.get("perflab.kind") == "sweep-trial"]
    assert len(parents) == 1 and len(trials) == 4
    assert all(t.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for t in trials)
    assert all(t.data.tags["perflab.status"] == "ok" and "samples_per_s" in t.data.metrics for t in trials)
    assert all(t.data.metrics["overhead_s"] >= 0 and "trial_wall_s" in t.data.metrics for t in trials)
    parent = parents[0].data.metrics
    assert parent["median_overhead_s"] == pytest.approx(statistics.median(r["overhead_s"] for r in rows))
    assert parent["server_start_s"] > 0 and parent["sweep_wall_s"] > sum(r["trial_wall_s"] for r in rows)
    assert "measurement overhead beyond the training steps" in (tmp_path / "out" / "recommendation.md").read_text()
    names = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"results.csv", "recommendation.yaml", "recommendation.md", "history.png", "importance.png", "pareto.png",
            "batch_size.png"} <= names  # fmt: skip


@pytest.mark.slow  # four trials to the memory wall (10-24 s); the OOM skip rule is in the fast tier (test_search)
def test_memory_estimate_grows_with_the_batch_and_the_cap_prunes_oom(data: str, tmp_path: Path) -> None:
    # the footprint estimate (state + tensors saved for backward), measured in-process for two batches
    est = {b: measure(tiny_job(data, b, steps_per_test=1, warmup_steps=0))["estimated_memory_gb"] for b in (32, 64)}
    assert 0 < est[32] < est[64]
    cap = (est[32] + est[64]) / 2
    overrides = {"preset": "tiny", "batch_sizes": "16,32,64,128", "num_workers_options": "0", "steps_per_test": 2,
                 "warmup_steps": 1, "device": "cpu", "test_mixed_precision": False, "test_pin_memory": False,
                 "max_memory_gb": cap, "verify_repeats": 0, "rank_rounds": 0, "probe": False,
                 # 128 never runs: the shared study stays short of its four, and waits two heartbeats for other
                 # workers' trials before it concludes (sweeps.study.settle): 2 s at 1 s, not 10 s at the default 5 s
                 "heartbeat_interval_s": 1}  # fmt: skip
    rows = sweep(data_path=data, strategy="smart", storage=f"sqlite:///{tmp_path / 'o.db'}", track=False,
                 overrides=overrides, echo=lambda _: None).rows  # fmt: skip
    status = {r["batch_size"]: r["status"] for r in rows if r["status"] != "skipped"}
    assert status == {16: "ok", 32: "ok", 64: "oom"}  # 128 is never run: behind the wall
    # the simulated device holds the estimate: its share of the cap, not the process's RSS
    assert all(0 < r["memory_pct"] < 100 and r["peak_memory_gb"] < cap for r in rows if r["status"] == "ok")


def test_trial_past_its_deadline_is_killed(data: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed within its deadline and the kill's grace, timed from the child's start: the forkserver's start before
    it (its imports) took 3-4 s on the idle 2-core host and 15 s beside other work."""
    from sweeps import trial

    job = tiny_job(data, 16, num_workers=1, steps_per_test=10**7, warmup_steps=0)
    started: list[float] = []
    wait = trial._wait
    monkeypatch.setattr(trial, "_wait", lambda *a: started.append(time.monotonic()) or wait(*a))
    out = run_trial(job, timeout_s=1.5)
    assert out.status == "timeout" and time.monotonic() - started[0] < 1.5 + 2.0 + 3.0  # deadline, grace, margin


def test_a_clearly_worse_trial_is_stopped_after_its_first_steps(data: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped at its interim report, long before its 60 s deadline: timed from the child's start, not the
    forkserver's (test_trial_past_its_deadline_is_killed)."""
    from sweeps import trial

    seen: list[dict] = []

    def worse(interim: dict) -> str:
        seen.append(interim)
        return "clearly worse"

    started: list[float] = []
    wait = trial._wait
    monkeypatch.setattr(trial, "_wait", lambda *a: started.append(time.monotonic()) or wait(*a))
    endless = tiny_job(data, 16, steps_per_test=10**6, warmup_steps=1, prune_after_steps=2)
    out = run_trial(endless, 60, should_prune=worse)
    assert out.status == "pruned" and out.error == "clearly worse" and time.monotonic() - started[0] < 30
    assert seen[0]["steps"] == 2 and seen[0]["samples_per_s"] > 0 and out.metrics["interim_samples_per_s"] > 0
    kept = run_trial(tiny_job(data, 16, steps_per_test=4, warmup_steps=1, prune_after_steps=2), 60,
                     should_prune=lambda interim: None)  # fmt: skip
    assert kept.status == "ok" and kept.metrics["samples_per_s"] > 0


def test_other_data_under_the_same_study_name_is_refused(tmp_path: Path) -> None:
    a, b = make_data(tmp_path / "a.h5", 300, 16, seed=1).path, make_data(tmp_path / "b.h5", 300, 16, seed=2).path
    overrides = {"preset": "tiny", "batch_sizes": "16", "num_workers_options": "0", "steps_per_test": 1,
                 "warmup_steps": 0, "device": "cpu", "test_mixed_precision": False, "verify_repeats": 0,
                 "probe": False}  # fmt: skip
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    kw = {"storage": storage, "study_name": "same", "track": False, "overrides": overrides, "echo": lambda _: None}
    assert [r["status"] for r in sweep(data_path=a, **kw).rows] == ["ok"]  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"different data .*--study-name NEW.*--resume"):
        sweep(data_path=b, **kw)  # type: ignore[arg-type]


def test_generated_files_go_to_the_ignored_results_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFLAB_RESULTS_DIR")
    monkeypatch.chdir(tmp_path)
    assert default_storage() == f"sqlite:///{tmp_path / 'perflab-results' / 'optuna.db'}"
    ignored = (Path(__file__).parents[2] / ".gitignore").read_text().splitlines()
    assert "/perflab-results/" in ignored


def test_the_command_counts_measured_configurations_without_a_terminal(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from perflab.cli import app

    data = make_data(tmp_path / "d.h5", 300, 16).path
    args = ["sweep", "run", "--workload", "tiny", "--data-path", data, "--batch-sizes", "8,16", "--num-workers", "0",
            "--steps", "1", "--warmup", "0", "--verify-repeats", "0", "--no-track", "--storage",
            f"sqlite:///{tmp_path / 'o.db'}", "--config", str(QUICK)]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    counts = [m.group(1) for line in result.output.splitlines() if (m := re.match(r"\s*(\d+/\d+) trial \d+: ", line))]
    assert counts == ["1/4", "2/4", "3/4", "4/4"]  # 2 batches x AMP off/on, counted as measured


@pytest.mark.slow  # a sweep started and killed mid-trial (12 s); a trial's own timeout kill is in the fast tier
def test_a_trial_ends_when_the_sweeps_process_is_killed(data: str, tmp_path: Path) -> None:
    """A trial runs in a session of its own (its group is killed on timeout); a sweep killed with SIGKILL, which
    runs no clean-up, must not leave it (and its DataLoader workers) training on."""
    psutil = pytest.importorskip("psutil")
    if not sys.platform.startswith("linux"):
        pytest.skip("a trial ends with its sweep through Linux's PR_SET_PDEATHSIG")
    script = (f"from tests.sweeps.test_sweep_run import tiny_job; from sweeps.trial import run_trial; "
              f"run_trial(tiny_job({data!r}, 16, num_workers=1, steps_per_test=10**7, warmup_steps=0), 600, "
              f"workdir={str(tmp_path)!r})")  # fmt: skip
    sweep = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "trial.log").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2.0)  # the trial's DataLoader worker started too
        below = psutil.Process(sweep.pid).children(recursive=True)  # the forkserver, the trial, its worker
        assert any(os.getsid(p.pid) == p.pid for p in below), "no trial in a session of its own"
    finally:
        sweep.kill()
        sweep.wait()

    def alive(p: object) -> bool:
        try:
            return p.status() != psutil.STATUS_ZOMBIE  # type: ignore[attr-defined]
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 20
    while any(alive(p) for p in below) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [(p.pid, p.name()) for p in below if alive(p)]


def test_a_bad_storage_is_refused_before_the_trial_server_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import sweeps.runner

    def refuse(*_: object) -> float:
        raise AssertionError("the trial server started before the storage was checked")

    monkeypatch.setattr(sweeps.runner, "start_server", refuse)
    with pytest.raises(ConfigError, match=r"^--storage 'bogus://x': expected an SQLAlchemy URL"):
        sweep(storage="bogus://x", overrides={"workload": "tiny"}, track=False)


def test_an_interrupted_sweep_ends_its_parent_killed_and_says_how_to_resume(
    data: str, tmp_path: Path, mlflow_uri: str
) -> None:
    uri = mlflow_uri

    def interrupted(params: dict, should_prune: object = None) -> object:
        raise KeyboardInterrupt  # what perflab's main makes of Ctrl-C, SIGTERM and SIGHUP

    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        sweep(data_path=data, overrides={"preset": "tiny", "batch_sizes": "16,32", "verify_repeats": 0},
              storage=f"sqlite:///{tmp_path / 'optuna.db'}", study_name="cut", evaluate=interrupted,
              echo=said.append)  # fmt: skip
    assert "interrupted; the same --storage and --study-name 'cut' resume the sweep" in said
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("Default").experiment_id])
    parents = [r for r in runs if r.data.tags.get("perflab.kind") == "sweep"]
    assert [p.info.status for p in parents] == ["KILLED"]


def test_more_dataloader_workers_than_cores_are_warned_about_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """--num-workers (or the baseline's) above the host's usable cores ran without a word; they are still measured
    (that more workers than cores do not help is a finding), with one line naming them and the cores."""
    import sweeps.runner

    monkeypatch.setattr(sweeps.runner, "usable_cores", lambda: 4)
    lines: list[str] = []
    overrides = {"workload": "sweeps.examples.mlp_tensors:make", "device": "cpu", "num_workers_options": "0,4,8,16",
                 "baseline": "batch_size=32,num_workers=6"}  # fmt: skip
    sw = sweeps.runner._prepare(None, None, "grid", None, overrides, lines.append)
    assert sw.cfg.num_workers_options == [0, 4, 8, 16]
    assert lines == ["warning: num_workers 6, 8, 16: more DataLoader workers than this host's 4 usable cores; they "
                     "will share cores (measured all the same)"]  # fmt: skip
    lines.clear()
    sweeps.runner._prepare(None, None, "grid", None, {**overrides, "num_workers_options": "0,4", "baseline": None},
                           lines.append)  # fmt: skip
    assert lines == []


def test_a_resumed_sweeps_count_starts_from_what_the_study_holds() -> None:
    """A resumed sweep of 12 configurations, 3 measured before, counted its first trial '1/12' and ended at '9/12'."""
    from types import SimpleNamespace

    import sweeps.runner

    def trial(number: int, status: str) -> SimpleNamespace:
        config = {"batch_size": 16, "num_workers": 0}
        return SimpleNamespace(number=number, user_attrs={"status": status, "config": config}, params=config,
                               system_attrs={})  # fmt: skip

    trials = [trial(0, "ok"), trial(1, "oom"), trial(2, "ok")]
    study = SimpleNamespace(get_trials=lambda deepcopy=False, states=None: trials)
    steps: list[int] = []
    sw = SimpleNamespace(echo=print, tracker=None)
    report = sweeps.runner._reporter(sw, lambda: lambda line, advance: steps.append(advance))  # type: ignore[arg-type]
    for number, status in ((4, "ok"), (5, "skipped"), (6, "failed")):
        trials.append(trial(number, status))
        report(study, trials[-1])
    assert steps == [4, 0, 1]  # 4/12 first (3 held + this one), then as before
