"""MLflow for ``perflab kernels``: a parent run per case, a child per dtype and provider, artifacts; a
failed check is recorded, a crash marks the parent FAILED, and under ``mlflow run`` cases share its run."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch
from typer.testing import CliRunner

from bench.record.store import child_runs, log_run, read_artifact_text, read_run
from kernels.case import CASES
from kernels.common import retyped
from perflab.cli import app
from tests.kernels.cli_run import GROUP, SHAPE, KernelsRun

SMOKE = ["--dtype", "fp32", "--provider", "triton", "--smoke"]


def _logged(output: str) -> dict[str, str]:
    """{case: parent run id} from the CLI's "logged <case> to MLflow run <id>" lines."""
    return {line.split()[1]: line.split()[-1] for line in output.splitlines() if line.startswith("logged ")}


@pytest.mark.xdist_group(GROUP)
def test_parent_per_case_child_per_provider(kernels_cli: KernelsRun) -> None:
    uri = kernels_cli.uri
    parents = _logged(kernels_cli.output)
    assert list(parents) == ["rms", "poly"]
    for case, run_id in parents.items():
        run = read_run(run_id, uri)
        assert (run.name, run.status, run.tags["perflab.kind"]) == (f"perflab kernels {case}", "FINISHED", "kernels")
        assert f"{case}.fp32.fwd.speedup_vs_naive_geomean" in run.metrics
        assert f"{case}.fp32.bwd.speedup_vs_naive_geomean" in run.metrics
        children = child_runs(run_id, uri)
        assert [c.name for c in children] == [f"kernels:{case}:fp32:naive", f"kernels:{case}:fp32:triton"]
        triton = children[1]
        assert (triton.tags["perflab.provider"], triton.tags["perflab.status"]) == ("triton", "ok")
        assert triton.status == "FINISHED" and triton.metrics[f"fwd.{SHAPE}_us"] > 0
        assert triton.metrics["bwd.speedup_vs_naive_geomean"] > 0
        assert "fwd.speedup_vs_naive_geomean" not in children[0].metrics  # naive against itself: not logged
        assert read_artifact_text(run_id, f"{case}-fp32-bwd-perf.csv", uri).startswith("dim,batch_size,seq_len,")
    assert {p.name for p in kernels_cli.save_path.iterdir()} >= {"poly-fp32-fwd-speedup.png", "rms-fp32-bwd-perf.csv"}


def test_failed_check_is_logged_not_timed(interp: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:  # fmt: skip
    def wrong_eps(ref: torch.nn.Module) -> torch.nn.Module:
        mod = retyped(ref, interp.TritonRMSNorm)
        mod.eps = 0.5
        return mod

    monkeypatch.setattr(CASES["rms"], "custom", wrong_eps)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = CliRunner().invoke(app, ["kernels", "--case", "rms", *SMOKE, "--save-path", str(tmp_path / "o"),
                                      "--tracking-uri", uri])  # fmt: skip
    assert result.exit_code == 0, result.output
    run_id = _logged(result.output)["rms"]
    triton = child_runs(run_id, uri)[1]
    assert triton.tags["perflab.status"] == "skipped"
    assert triton.tags["perflab.reason"].startswith("check failed at 2x3x37: output[0]")
    assert not any(k.endswith("_us") for k in triton.metrics)
    assert "check failed" in read_artifact_text(run_id, "rms-skipped.txt", uri)
    assert "rms.fp32.fwd.speedup_vs_naive_geomean" not in read_run(run_id, uri).metrics


def test_crash_marks_the_parent_failed(interp: ModuleType, tmp_path: Path) -> None:
    from kernels.tracking import KernelsTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(RuntimeError, match="boom"), KernelsTracker("rms", {"cases": "rms"}, tracking_uri=uri) as t:
        parent = t.parent
        raise RuntimeError("boom")
    run = read_run(parent, uri)
    assert run.status == "FAILED" and run.tags["perflab.suite_status"] == "crashed"


def test_cases_share_an_adopted_run(interp: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``mlflow run -e kernels`` every case logs into the project's run: no param clashes."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    project_run = log_run("mlflow run kernels", params={}, metrics={}, artifacts={}, tracking_uri=uri)
    monkeypatch.setenv("MLFLOW_RUN_ID", project_run)
    result = CliRunner().invoke(app, ["kernels", "--case", "rms,add_rms", *SMOKE, "--save-path",
                                      str(tmp_path / "o"), "--tracking-uri", uri])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert set(_logged(result.output).values()) == {project_run}
    run = read_run(project_run, uri)
    assert {"rms.fp32.fwd.speedup_vs_naive_geomean", "add_rms.fp32.fwd.speedup_vs_naive_geomean"} <= set(run.metrics)
    assert len(child_runs(project_run, uri)) == 4
