"""Real isolated trials (tiny preset, CPU): a 2x2 grid into MLflow, the simulated memory wall, a timeout."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeps.data import make_data
from sweeps.runner import sweep
from sweeps.trial import run_trial
from sweeps.workload import PRESETS, TrialJob, estimate_memory_bytes


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_data(tmp_path_factory.mktemp("data") / "d.h5", 2000, 16).path


def test_grid_2x2_completes_and_logs_nested_runs(data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(name, raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    overrides = {"preset": "tiny", "batch_sizes": "16,32", "num_workers_options": "0,1", "steps_per_test": 3,
                 "warmup_steps": 1, "device": "cpu", "test_mixed_precision": False,
                 "test_pin_memory": False}  # fmt: skip
    rec, rows = sweep(data_path=data, out=tmp_path / "out", overrides=overrides, echo=lambda _: None)
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
    runs = client.search_runs([client.get_experiment_by_name("perflab").experiment_id])
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
    assert {"results.csv", "recommendation.yaml", "recommendation.md"} <= names


def test_memory_cap_prunes_oom_and_skips_larger_batches(data: str, tmp_path: Path) -> None:
    p = PRESETS["tiny"]
    cap = (estimate_memory_bytes(p, 16, 10, 32, False) + estimate_memory_bytes(p, 16, 10, 64, False)) / 2 / 1e9
    overrides = {"preset": "tiny", "batch_sizes": "16,32,64,128", "num_workers_options": "0", "steps_per_test": 2,
                 "warmup_steps": 1, "device": "cpu", "test_mixed_precision": False, "test_pin_memory": False,
                 "max_memory_gb": cap}  # fmt: skip
    _, rows = sweep(data_path=data, strategy="smart", storage=f"sqlite:///{tmp_path / 'o.db'}", track=False,
                    overrides=overrides, echo=lambda _: None)  # fmt: skip
    status = {r["batch_size"]: r["status"] for r in rows if r["reason"] != "already measured"}
    assert status == {16: "ok", 32: "ok", 64: "oom"}  # 128 is never run: behind the wall


def test_trial_past_its_deadline_is_killed(data: str) -> None:
    job = TrialJob(data, "tiny", 16, 1, False, False, steps=10**7, warmup_steps=0, device="cpu")
    t0 = time.monotonic()
    out = run_trial(job, timeout_s=1.5)
    assert out.status == "timeout" and time.monotonic() - t0 < 10
