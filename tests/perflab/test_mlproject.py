"""The MLproject's entry points: each command, as ``mlflow run`` builds it, parses as a perflab CLI call,
and the ``kernels`` entry point's parameters reach the CLI options of the same name."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from mlflow.projects import _project_spec

from perflab.cli import app

ROOT = Path(__file__).resolve().parents[2]


def _project() -> Any:
    return _project_spec.load_project(str(ROOT))


def _parse(entry_point: str, user_params: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """(CLI command name, its parsed parameters) for the command ``mlflow run . -e <entry_point> -P ...``
    runs, parsed by the perflab CLI but not run."""
    command = _project().get_entry_point(entry_point).compute_command(user_params or {}, None)
    args = shlex.split(command)
    assert args.pop(0) == "perflab", command
    cmd = typer.main.get_command(app)
    while hasattr(cmd, "commands"):  # a group: descend to the subcommand named next
        cmd = cmd.commands[args.pop(0)]
    return str(cmd.name), dict(cmd.make_context(str(cmd.name), args).params)


def test_every_entry_point_parses_with_its_defaults() -> None:
    names = list(_project()._entry_points)
    assert {"main", "chapter", "run", "sweep", "peak", "report", "kernels"} <= set(names)
    for name in names:
        _parse(name)  # an unknown flag or a default the option's type refuses raises here


def test_kernels_parameters_map_to_cli_options() -> None:
    spec = _project().get_entry_point("kernels").parameters
    assert set(spec) == {"case", "dtype", "save_path", "max_shapes"}
    name, params = _parse("kernels")
    assert name == "kernels"
    assert (params["case"], params["dtype"], params["save_path"], params["max_shapes"], params["plot"]) == (
        "all", "bf16", Path("perflab-results/kernels"), 0, True)  # fmt: skip
    given = {"case": "rms,add_rms", "dtype": "fp32", "save_path": "out dir/k", "max_shapes": "6"}
    _, params = _parse("kernels", given)
    assert (params["case"], params["dtype"], params["save_path"], params["max_shapes"]) == (
        "rms,add_rms", "fp32", Path("out dir/k"), 6)  # fmt: skip
    for key in spec:  # every MLproject parameter is the CLI option of the same name
        assert key in params


def test_kernels_max_shapes_must_be_a_count() -> None:
    with pytest.raises(typer.BadParameter):
        _parse("kernels", {"max_shapes": "six"})


def test_a_malformed_chapter_leaves_no_failed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mlflow run . -e chapter -P ch=99``: perflab refuses the target (one line, exit 2) and deletes the run
    ``mlflow run`` opened for it, so the store shows no FAILED run for a typo; a run something was logged to is
    never deleted."""
    import os
    import sys
    import time

    import mlflow
    from mlflow import MlflowClient
    from mlflow.entities import ViewType
    from mlflow.exceptions import ExecutionException
    from mlflow.tracking import fluent
    from mlflow.tracking._tracking_service import utils as tracking

    from bench.record.store import discard_refused_run

    # mlflow.set_tracking_uri and mlflow.projects.run set process-wide state (the URI, the active experiment): put
    # back after this test, or every later test in this process logs into this test's deleted store
    monkeypatch.setattr(tracking, "_tracking_uri", tracking._tracking_uri)
    monkeypatch.setattr(fluent, "_active_experiment_id", fluent._active_experiment_id)

    shim = tmp_path / "bin" / "perflab"  # the project's command, run from this checkout (not the installed one)
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m perflab "$@"\n')
    shim.chmod(0o755)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(name, raising=False)
    mlflow.set_tracking_uri(uri)
    store = MlflowClient(uri)
    store.create_experiment("perflab", artifact_location=(tmp_path / "artifacts").as_uri())
    with pytest.raises(ExecutionException):
        mlflow.projects.run(str(ROOT), "chapter", parameters={"ch": "99"}, env_manager="local",
                            experiment_name="perflab")  # fmt: skip
    experiments = [e.experiment_id for e in store.search_experiments()]
    (opened,) = store.search_runs(experiments, run_view_type=ViewType.ALL)  # the one `mlflow run` opened
    deadline = time.monotonic() + 90  # deleted by a detached process once MLflow has ended it
    while store.get_run(opened.info.run_id).info.lifecycle_stage != "deleted" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert store.get_run(opened.info.run_id).info.lifecycle_stage == "deleted"
    assert not store.search_runs(experiments)  # no FAILED run, nor any other, left to see
    kept = store.create_run(opened.info.experiment_id, tags={"mlflow.project.entryPoint": "chapter",
                                                             "perflab.targets": "7"})  # fmt: skip
    store.set_terminated(kept.info.run_id, "FAILED")
    assert not discard_refused_run(kept.info.run_id, uri)  # perflab logged to it: kept
    assert store.get_run(kept.info.run_id).info.lifecycle_stage == "active"
