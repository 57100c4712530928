"""The MLflow contract of bench.record.tracking, checked by reading a real (temporary SQLite) store back.

One store and one logged suite are shared by the module: creating a SQLite store runs MLflow's
migrations (seconds), so each test reads back the same runs instead of logging its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run

from bench.define.result import (
    Comparison,
    ErrorInfo,
    Memory,
    Profile,
    StageRecord,
    Timing,
    VariantResult,
    VariantSpec,
    Verification,
    Work,
)
from bench.measure.stats import summarize
from bench.record.tracking import Tracker

_MLFLOW_ENV = ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID")
HOST = {"python": "3.11", "git": {"commit": "abc123"}, "cpu": "Test CPU 9000 @ 3.00GHz"}
GPU_MANIFEST = {"device": "cuda:0", "torch": "2.5", "gpu": {"name": "NVIDIA H100 80GB HBM3"}}
CONFIG = {"iterations": 5, "warmup": 2, "device": "auto", "timing_mode": "auto", "percentiles": [50.0, 99.9]}
LONG_DETAIL = "max relative error 1e-7 within rtol 1e-5; " * 300  # > 5000 chars: must be truncated


# ---------------------------------------------------------------------------------------- builders


def spec(variant: str, example: str = "transpose") -> VariantSpec:
    return VariantSpec(chapter="ch07", example=example, variant=variant, path=f"/x/{variant}_{example}.py")


def ok_result(variant: str, samples: list[float], profile_dir: str | None = None) -> VariantResult:
    return VariantResult(
        spec=spec(variant),
        status="ok",
        elapsed_s=3.5,
        stages=[
            StageRecord(name="startup", status="ok", duration_s=1.25, limit_s=120.0),
            StageRecord(name="setup", status="ok", duration_s=0.5, limit_s=30.0),
            StageRecord(name="measurement", status="ok", duration_s=0.75, limit_s=15.0),
        ],
        config=CONFIG,
        device="cuda:0",
        timing=Timing(
            mode="cuda_event",
            method="cuda events, L2 flushed",
            samples_ms=samples,
            stats=summarize(samples, percentiles=[50.0, 99.9]),
            first_call_ms=42.0,
            warmup_calls=2,
            l2_flushed=True,
        ),
        memory=Memory(device="cuda:0", peak_mb=512.0, allocated_mb=256.0, reserved_mb=1024.0),
        work=Work(bytes=2 * 4096 * 4096 * 4, flops=None),
        manifest=GPU_MANIFEST,
        profile=Profile(dir=profile_dir) if profile_dir else None,
        cuda_visible_devices="1",  # a worker pinned to the second GPU (--gpus 0,1)
    )


def timeout_result() -> VariantResult:
    return VariantResult(
        spec=spec("optimized_tiled"),
        status="timeout",
        failed_stage="measurement",
        elapsed_s=16.0,
        limit_s=15.0,
        stages=[
            StageRecord(name="startup", status="ok", duration_s=1.0),
            StageRecord(name="measurement", status="timeout", duration_s=15.0, limit_s=15.0),
            StageRecord(name="teardown", status="not_reached"),
        ],
        error=ErrorInfo(kind="timeout", message="measurement exceeded 15.0 s"),
        config=CONFIG,
        device="cuda:0",
        manifest=GPU_MANIFEST,
    )


def failed_result() -> VariantResult:
    """Crashed at startup: no device, no timing, no memory, no stage durations."""
    return VariantResult(
        spec=spec("baseline", example="softmax"),
        status="failed",
        failed_stage="startup",
        stages=[StageRecord(name="startup", status="failed")],
        error=ErrorInfo(kind="exception", message="ImportError: no module named foo"),
        config=CONFIG,
    )


def comparison(base: VariantResult, opt: VariantResult, detail: str = "equal") -> Comparison:
    b, o = base.median_ms, opt.median_ms
    return Comparison(
        chapter=opt.spec.chapter,
        example=opt.spec.example,
        variant=opt.spec.variant,
        baseline_status=base.status,
        optimized_status=opt.status,
        baseline_median_ms=b,
        optimized_median_ms=o,
        speedup=b / o if b is not None and o is not None else None,
        status="ok" if opt.status == "ok" else "failed",
        verification=Verification(
            verified=opt.status == "ok", detail=detail, max_rel_error=1.5e-7 if opt.status == "ok" else None
        ),
    )


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A SQLite store outside the working directory; cwd moves to an empty dir so that a store
    accidentally opened at MLflow's default (./mlflow.db) would not be this one."""
    root = tmp_path_factory.mktemp("mlflow")
    cwd = root / "cwd"
    cwd.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for name in _MLFLOW_ENV:
            mp.delenv(name, raising=False)
        mp.chdir(cwd)
        uri = f"sqlite:///{root}/mlflow.db"
        yield {"uri": uri, "root": root, "cwd": cwd, "client": MlflowClient(tracking_uri=uri)}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _MLFLOW_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def suite(store: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One logged suite: baseline + optimized (verified, faster) + a timed-out optimized + a crash."""
    trace = tmp_path_factory.mktemp("trace") / "trace.json"
    trace.write_text('{"traceEvents": []}')
    base = ok_result("baseline", [2.0, 2.2, 2.1, 2.4, 2.3])
    opt = ok_result("optimized", [1.0, 1.1, 0.9, 1.2, 1.05], profile_dir=str(trace.parent))
    assert opt.timing is not None and opt.recheck is None  # flags of a variant without a recheck (check_inputs off)
    opt.timing.machine_flags = ["throttled before measurement: sw_power_cap"]
    slow = timeout_result()
    crash = failed_result()
    cmp_opt = comparison(base, opt, detail=LONG_DETAIL)
    cmp_slow = comparison(base, slow, detail="no output from optimized: not verified")
    with Tracker(
        experiment="perflab-test-suite",
        tracking_uri=store["uri"],
        run_name="perflab run ch07",
        host_manifest=HOST,
        tags={"perflab.cold_start": "false"},
    ) as tracker:
        ids = {
            "baseline": tracker.log_variant(base),
            "optimized": tracker.log_variant(opt, cmp_opt),
            "optimized_tiled": tracker.log_variant(slow, cmp_slow),
            "crash": tracker.log_variant(crash),
        }
        tracker.finish("# summary\n\nok\n", {"n_variants": 4, "targets": ["ch07"]})
    client: MlflowClient = store["client"]
    return {
        "tracker": tracker,
        "ids": ids,
        "runs": {k: client.get_run(v) for k, v in ids.items()},
        "parent": client.get_run(tracker.parent_run_id),
        "results": {"baseline": base, "optimized": opt, "optimized_tiled": slow, "crash": crash},
        "cmp": cmp_opt,
    }


def read_artifact(client: MlflowClient, run_id: str, path: str, dst: Path) -> str:
    return Path(client.download_artifacts(run_id, path, str(dst))).read_text()


def artifact_paths(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    return {f.path for f in client.list_artifacts(run_id, path)}


# ---------------------------------------------------------------------------------------- the suite


def test_parent_and_nested_runs(store: dict[str, Any], suite: dict[str, Any]) -> None:
    client: MlflowClient = store["client"]
    parent: Run = suite["parent"]
    exp = client.get_experiment(parent.info.experiment_id)
    assert exp.name == "perflab-test-suite"
    assert parent.info.run_name == "perflab run ch07"
    # Completed with failing variants: FINISHED, not FAILED.
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["perflab.suite_status"] == "completed"
    assert parent.data.tags["perflab.git_commit"] == "abc123"  # from the host manifest (no git history needed)
    assert "perflab.git_dirty" not in parent.data.tags  # unknown: no tag rather than a guess
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    assert {r.info.run_id for r in children} == set(suite["ids"].values())
    runs = suite["runs"]
    assert runs["optimized"].info.run_name == "ch07:transpose:optimized"
    assert runs["crash"].info.run_name == "ch07:softmax:baseline"
    assert runs["baseline"].info.status == "FINISHED"
    assert runs["optimized_tiled"].info.status == "FAILED"  # the variant failed, flagged in the UI
    assert runs["crash"].info.status == "FAILED"


def test_variant_tags(suite: dict[str, Any]) -> None:
    tags = suite["runs"]["optimized"].data.tags
    expected = {
        "perflab.chapter": "ch07",
        "perflab.example": "transpose",
        "perflab.variant": "optimized",
        "perflab.status": "ok",
        "perflab.device": "cuda:0",
        "perflab.timing_mode": "cuda_event",
        "perflab.gpu": "NVIDIA H100 80GB HBM3",
        "perflab.torch": "2.5",  # software key of regression histories, from the device manifest
        "perflab.cold_start": "false",  # caller tags reach variant runs too
        "perflab.cuda_visible_devices": "1",  # which physical GPU cuda:0 was
        "perflab.cpu": "Test CPU 9000 @ 3.00GHz",  # the host's CPU, from the suite's host manifest
    }
    assert {k: tags.get(k) for k in expected} == expected
    assert "perflab.failed_stage" not in tags
    assert "perflab.triton" not in tags  # the manifest has no triton: no tag, not "None"
    assert tags["perflab.machine_flags"] == "throttled before measurement: sw_power_cap"
    assert "perflab.machine_flags" not in suite["runs"]["baseline"].data.tags  # none raised: no tag
    assert tags["mlflow.parentRunId"] == suite["parent"].info.run_id


def test_timing_memory_stage_and_derived_metrics(suite: dict[str, Any]) -> None:
    result: VariantResult = suite["results"]["optimized"]
    m = suite["runs"]["optimized"].data.metrics
    st = result.timing.stats
    expected = {
        "time_mean_ms": st.mean_ms,
        "time_median_ms": st.median_ms,
        "time_std_ms": st.std_ms,
        "time_min_ms": st.min_ms,
        "time_max_ms": st.max_ms,
        "time_cv": st.cv,
        "time_p50_ms": st.percentiles_ms["p50"],
        "time_p90_ms": st.percentiles_ms["p90"],
        "time_p95_ms": st.percentiles_ms["p95"],
        "time_p99_ms": st.percentiles_ms["p99"],
        "time_p99_9_ms": st.percentiles_ms["p99_9"],  # configured extra percentile, legal name
        "time_first_call_ms": 42.0,
        "mem_peak_mb": 512.0,
        "mem_allocated_mb": 256.0,
        "mem_reserved_mb": 1024.0,
        "achieved_gbps": result.derived_metrics()["achieved_gbps"],
        "stage_startup_s": 1.25,
        "stage_setup_s": 0.5,
        "stage_measurement_s": 0.75,
    }
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, rel=1e-12), key
    assert "mem_rss_peak_mb" not in m  # absent in the result, so absent in the store
    assert "achieved_tflops" not in m  # no flops declared
    assert "speedup" not in suite["runs"]["baseline"].data.metrics


def test_params_are_effective_config_plus_device(suite: dict[str, Any]) -> None:
    params = suite["runs"]["baseline"].data.params
    expected = {
        "iterations": "5",
        "warmup": "2",
        "timing_mode": "auto",
        "percentiles": "50.0,99.9",  # lists comma-joined
        "device": "cuda:0",  # resolved device, not the configured "auto"
        "device_requested": "auto",
    }
    assert {k: params.get(k) for k in expected} == expected


def test_result_and_manifest_artifacts(store: dict[str, Any], suite: dict[str, Any], tmp_path: Path) -> None:
    client: MlflowClient = store["client"]
    run_id = suite["ids"]["optimized"]
    assert {"result.json", "manifest.json", "profile"} <= artifact_paths(client, run_id)
    back = VariantResult.model_validate_json(read_artifact(client, run_id, "result.json", tmp_path))
    original: VariantResult = suite["results"]["optimized"]
    assert back == original
    assert back.timing is not None and back.timing.samples_ms == original.timing.samples_ms
    manifest = json.loads(read_artifact(client, run_id, "manifest.json", tmp_path))
    assert manifest["host"] == HOST and manifest["device"] == GPU_MANIFEST
    assert manifest["config"] == original.config
    assert manifest["seeds"] == {"random/numpy/torch/cuda": original.config.get("seed")}
    assert artifact_paths(client, run_id, "profile") == {"profile/trace.json"}
    assert "profile" not in artifact_paths(client, suite["ids"]["baseline"])  # no trace, no folder


def test_optimized_run_has_speedup_and_verification(suite: dict[str, Any]) -> None:
    run = suite["runs"]["optimized"]
    base, opt = suite["results"]["baseline"], suite["results"]["optimized"]
    assert run.data.metrics["speedup"] == pytest.approx(base.median_ms / opt.median_ms, rel=1e-12)
    assert run.data.metrics["speedup"] > 1.5
    assert run.data.metrics["max_rel_error"] == pytest.approx(1.5e-7)
    tags = run.data.tags
    assert tags["perflab.verified"] == "true"
    assert tags["perflab.pair_status"] == "ok"
    assert len(tags["perflab.verification"]) == 5000
    assert LONG_DETAIL.startswith(tags["perflab.verification"][:-3])
    assert tags["perflab.baseline_run_id"] == suite["ids"]["baseline"]


@pytest.mark.parametrize("which", ["optimized_tiled", "crash"])
def test_failed_variants_log_no_timing(suite: dict[str, Any], which: str) -> None:
    run = suite["runs"][which]
    result: VariantResult = suite["results"][which]
    tags, metrics = run.data.tags, run.data.metrics
    assert tags["perflab.status"] == result.status
    assert tags["perflab.failed_stage"] == result.failed_stage
    assert tags["perflab.error_kind"] == result.error.kind
    invented = [k for k in metrics if k.startswith(("time_", "mem_", "achieved_", "speedup", "max_rel"))]
    assert invented == []
    measured = {f"stage_{s.name}_s" for s in result.stages if s.duration_s is not None}
    assert {k for k in metrics if k.startswith("stage_")} == measured


def test_timed_out_optimized_still_has_pair_tags(suite: dict[str, Any]) -> None:
    tags = suite["runs"]["optimized_tiled"].data.tags
    assert tags["perflab.verified"] == "false"
    assert tags["perflab.pair_status"] == "failed"
    assert tags["perflab.verification"] == "no output from optimized: not verified"
    assert tags["perflab.limit_s"] == "15.0"


def test_parent_summary(store: dict[str, Any], suite: dict[str, Any], tmp_path: Path) -> None:
    client: MlflowClient = store["client"]
    parent: Run = suite["parent"]
    run_id = parent.info.run_id
    assert read_artifact(client, run_id, "summary.md", tmp_path) == "# summary\n\nok\n"
    assert json.loads(read_artifact(client, run_id, "summary.json", tmp_path)) == {
        "n_variants": 4,
        "targets": ["ch07"],
    }
    tags, metrics = parent.data.tags, parent.data.metrics
    assert tags["perflab.n_variants"] == "4"
    assert tags["perflab.n_failed"] == "2"
    assert tags["perflab.targets"] == "ch07:softmax,ch07:transpose"
    assert metrics["n_ok"] == 2 and metrics["n_failed"] == 2 and metrics["n_pairs"] == 2
    assert metrics["speedup_geomean"] == pytest.approx(suite["cmp"].speedup)  # the only ok pair


# ---------------------------------------------------------------------------------------- lifecycle


def test_mlflow_run_id_is_adopted_and_not_terminated(
    store: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Inside `mlflow run` the project run is the parent; `mlflow run` terminates it, not us."""
    client: MlflowClient = store["client"]
    exp_id = client.create_experiment("mlflow-project-exp")
    outer = client.create_run(exp_id, run_name="mlflow run")
    monkeypatch.setenv("MLFLOW_RUN_ID", outer.info.run_id)
    tracker = Tracker(experiment="ignored-when-adopting", tracking_uri=store["uri"], tags={"perflab.targets": "7"})
    assert tracker.start() == outer.info.run_id
    assert tracker.experiment_id == exp_id
    child_id = tracker.log_variant(ok_result("baseline", [1.0, 2.0, 3.0]))
    tracker.finish("# s\n", {"ok": True})
    child = client.get_run(child_id)
    assert child.data.tags["mlflow.parentRunId"] == outer.info.run_id
    assert child.info.experiment_id == exp_id
    parent = client.get_run(outer.info.run_id)
    assert parent.info.status == "RUNNING"
    assert parent.data.tags["perflab.targets"] == "7"  # the caller's requested targets win
    assert {"summary.md", "summary.json"} <= artifact_paths(client, outer.info.run_id)
    assert client.get_experiment_by_name("ignored-when-adopting") is None


def test_tracking_uri_env_and_default_experiment(store: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    tracker = Tracker(run_name="from-env")  # tracking_uri=None, experiment=None
    run_id = tracker.start()
    tracker.finish("", {})
    run = store["client"].get_run(run_id)  # found in the env's store, not ./mlflow.db
    assert store["client"].get_experiment(run.info.experiment_id).name == "Default"
    assert not (store["cwd"] / "mlflow.db").exists()


def test_explicit_experiment_is_created(store: dict[str, Any]) -> None:
    client: MlflowClient = store["client"]
    assert client.get_experiment_by_name("brand-new-exp") is None
    tracker = Tracker(experiment="brand-new-exp", tracking_uri=store["uri"])
    run_id = tracker.start()
    tracker.finish("", {})
    exp = client.get_experiment_by_name("brand-new-exp")
    assert exp is not None and client.get_run(run_id).info.experiment_id == exp.experiment_id
    # A second tracker reuses it instead of failing on "already exists".
    again = Tracker(experiment="brand-new-exp", tracking_uri=store["uri"])
    again.start()
    again.finish("", {})
    assert again.experiment_id == exp.experiment_id


def test_crash_inside_context_marks_parent_failed(store: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError, match="scheduler blew up"):
        with Tracker(experiment="perflab-test-crash", tracking_uri=store["uri"]) as tracker:
            tracker.log_variant(ok_result("baseline", [1.0, 1.0]))
            raise RuntimeError("scheduler blew up")
    parent = store["client"].get_run(tracker.parent_run_id)
    assert parent.info.status == "FAILED"
    assert parent.data.tags["perflab.suite_status"] == "crashed"


def test_finish_failed_marks_owned_parent_failed(store: dict[str, Any]) -> None:
    tracker = Tracker(experiment="perflab-test-crash", tracking_uri=store["uri"])
    tracker.start()
    tracker.finish("# interrupted\n", {"interrupted": True}, failed=True)
    parent = store["client"].get_run(tracker.parent_run_id)
    assert parent.info.status == "FAILED"
    assert parent.data.tags["perflab.suite_status"] == "failed"


def test_mismatched_comparison_is_rejected(store: dict[str, Any], suite: dict[str, Any]) -> None:
    tracker = Tracker(experiment="perflab-test-crash", tracking_uri=store["uri"])
    tracker.start()
    with pytest.raises(ValueError, match="ch07:transpose:optimized passed with result ch07:transpose:baseline"):
        tracker.log_variant(suite["results"]["baseline"], suite["cmp"])
    tracker.finish("", {})


def test_default_store_is_mlflow_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No URI anywhere: MLflow's own default (./mlflow.db in the working directory)."""
    monkeypatch.chdir(tmp_path)
    tracker = Tracker(experiment="default-store")
    run_id = tracker.start()
    tracker.finish("", {})
    assert (tmp_path / "mlflow.db").is_file()
    default = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    assert default.get_run(run_id).info.status == "FINISHED"
    assert os.path.samefile(tracker.tracking_uri.removeprefix("sqlite:///"), tmp_path / "mlflow.db")
