"""Every perflab command with ``MLFLOW_TRACKING_URI`` set to a team's MLflow server (PostgreSQL backend, artifacts
proxied; ``mlflow_server`` in tests/services.py), as a GPU host of the team runs them: run, show, report, compare,
regressions, expectations, readme, kernels, sweep (its study in the same PostgreSQL) and import."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from typer.testing import CliRunner

from perflab.cli import app
from tests.services import REPO, Team, client_env

EXPERIMENT = "team-commands"


def _env(server: Team, tmp: Path) -> dict[str, str]:
    env = client_env()  # the server's credentials kept
    env.update({"MLFLOW_TRACKING_URI": server.uri, "MLFLOW_EXPERIMENT_NAME": EXPERIMENT, "PYTHONPATH": str(REPO),
                "PERFLAB_RESULTS_DIR": str(tmp / "results"), "COLUMNS": "200", "NO_COLOR": "1"})  # fmt: skip
    return env


def perflab(server: Team, tmp: Path, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perflab", *map(str, args)], cwd=tmp, env=_env(server, tmp),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.fixture(scope="module")
def suites(mlflow_server: Team, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two suites of chapter 7's transpose into the server, from the command line: history for the commands."""
    tmp = tmp_path_factory.mktemp("team")
    parents = []
    for _ in range(2):
        done = perflab(mlflow_server, tmp, "run", "-t", "ch7:transpose", "--device", "cpu")
        assert done.returncode == 0 and "MLflow parent run" in done.stdout, done.stdout + done.stderr
        parents.append(done.stdout.split("MLflow parent run")[1].split()[0])
    with pytest.MonkeyPatch.context() as mp:  # the in-process commands below read the same environment
        for k, v in _env(mlflow_server, tmp).items():
            if k.startswith(("MLFLOW_", "PERFLAB_", "COLUMNS")):
                mp.setenv(k, v)
        yield {"tmp": tmp, "parents": parents, "client": MlflowClient(mlflow_server.uri)}


def _cli(*args: str | Path) -> Any:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code in (0, 1), f"{args}: {result.output}{result.exception!r}"
    return result


def test_run_and_show_through_the_server(suites: dict[str, Any]) -> None:
    client: MlflowClient = suites["client"]
    parent = client.get_run(suites["parents"][1])
    assert parent.data.tags["perflab.suite_status"] == "completed" and parent.data.metrics["n_verified"] == 1
    assert client.get_experiment(parent.info.experiment_id).name == EXPERIMENT
    assert client.get_experiment(parent.info.experiment_id).artifact_location.startswith("mlflow-artifacts:")
    out = _cli("show").output
    assert suites["parents"][1] in out and "ch07:transpose" in out


def test_report_compare_regressions_expectations_and_readme_read_the_server(suites: dict[str, Any]) -> None:
    tmp, (first, second) = suites["tmp"], suites["parents"]
    client: MlflowClient = suites["client"]
    out = _cli("report", "--out", tmp / "report").output
    assert (tmp / "report" / "report.json").is_file() and second in out
    assert "report.json" in {a.path for a in client.list_artifacts(second)}  # uploaded through the server
    out = _cli("compare", first, second, "--metrics").output  # the suites' variants, under their shared chapter
    assert "transpose:optimized" in out and "time_median_ms" in out
    out = _cli("regressions", "--run-id", second).output
    # the first suite is history found through the server (with others of the store's, any experiment's, when
    # other tests logged chapter 7's transpose there too: regressions reads one history)
    assert f"run {second}:" in out and " 0 not-measured" in " ".join(out.split(f"run {second}:")[1].split())
    assert "no previous ok run" not in out, out
    out = _cli("expectations", "check", "--out", tmp / "expectations").output
    assert (tmp / "expectations" / "proof_of_benefit.csv").is_file() and second in out
    assert "proof_of_benefit.csv" in {a.path for a in client.list_artifacts(second)}
    out = _cli("readme", "--check", "--chapter", "7").output  # writes nothing
    assert f"from suite {second}" in out


def test_kernels_and_a_sweep_log_to_the_server_the_sweep_study_in_postgresql(
    suites: dict[str, Any], mlflow_server: Team, postgres: str
) -> None:
    tmp: Path = suites["tmp"]
    client: MlflowClient = suites["client"]
    done = perflab(mlflow_server, tmp, "kernels", "--case", "rms", "--dtype", "fp32", "--provider", "naive,triton",
                   "--max-shapes", "1", "--iterations", "3", "--save-path", tmp / "kernels")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    done = perflab(mlflow_server, tmp, "sweep", "run", "--workload", "tiny", "--strategy", "grid", "--batch-sizes",
                   "16,32", "--num-workers", "0", "--steps", "2", "--warmup", "1", "--device", "cpu",
                   "--verify-repeats", "0", "--storage", postgres, "--study-name", "team-sweep")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    exp = client.get_experiment_by_name(EXPERIMENT)
    kinds = [r.data.tags.get("perflab.kind") for r in client.search_runs([exp.experiment_id])]
    assert "kernels" in kinds and "sweep" in kinds and kinds.count("sweep-trial") >= 2

    import optuna

    from sweeps.storage import make_storage

    study = optuna.load_study(study_name="team-sweep", storage=make_storage(postgres))
    assert sum(t.user_attrs.get("status") == "ok" for t in study.trials) >= 2


def test_import_uploads_a_spool_to_the_server(
    suites: dict[str, Any], mlflow_server: Team, chapters: Callable[..., Path]
) -> None:
    tmp: Path = suites["tmp"]
    root = chapters({"ch07/baseline_x.py": {}, "ch07/optimized_x.py": {}})
    done = perflab(mlflow_server, tmp, "run", "--chapters-dir", root, "--device", "cpu", "--iterations", "3",
                   "--tracking-uri", "sqlite:////proc/perflab-x.db", "--experiment", "team-import")  # fmt: skip
    assert done.returncode == 1 and "perflab import" in done.stderr, done.stdout + done.stderr
    done = perflab(mlflow_server, tmp, "import", tmp / "results" / "spool", "--tracking-uri", mlflow_server.uri)
    assert done.returncode == 0 and "2 variant runs" in done.stdout, done.stdout + done.stderr
    client: MlflowClient = suites["client"]
    runs = client.search_runs([client.get_experiment_by_name("team-import").experiment_id])
    names = sorted(r.info.run_name for r in runs)
    assert names[1:] == ["ch07:x:baseline", "ch07:x:optimized"] and names[0].startswith("ch07 on cpu, "), names
