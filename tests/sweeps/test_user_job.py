"""A user's job written the way people write one (tests/sweeps/fixtures/h5_classifier.py: per-sample HDF5
reads normalised on the host in float32), swept on the CPU through ``--workload file.py:make``: a
recommendation, its ranking, its bottleneck in numbers and its verification against the plain default."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps.cli import join_list_values
from sweeps.runner import sweep
from tests.sweeps.fixtures.h5_classifier import write

JOB = str(Path(__file__).parent / "fixtures" / "h5_classifier.py") + ":make"
# a read from a slow file system per sample: the job input-bound (at most 100 samples/s with no workers) while its
# step alone takes over a thousand, so the probe names the bound on a loaded 2-core host too
LATENCY_S = 0.01


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("job") / "images.h5")
    write(path, samples=128, side=16)
    return path


@pytest.mark.slow  # a whole sweep: its grid, the verification, MLflow (the command's forms: below)
def test_a_users_job_gets_a_recommendation_its_bottleneck_and_a_verification(
    images: str, tmp_path: Path, mlflow_uri: str
) -> None:
    from mlflow import MlflowClient

    uri = mlflow_uri
    said: list[str] = []
    overrides = {"workload": JOB, "batch_sizes": "8 16", "num_workers_options": "0", "steps_per_test": 3,
                 "warmup_steps": 1, "device": "cpu", "test_mixed_precision": False, "rank_top": 2,
                 "rank_rounds": 2, "probe_seconds": 0.5, "verify_repeats": 2, "remeasure_seconds": 0,
                 "workload_args": {"storage_latency_s": LATENCY_S}}  # fmt: skip
    result = sweep(data_path=images, strategy="grid", storage=f"sqlite:///{tmp_path / 'o.db'}",
                   out=tmp_path / "out", overrides=overrides, echo=said.append)  # fmt: skip
    rec, c = result.recommendation, result.conclusion
    assert rec.recommended is not None and rec.recommended["batch_size"] in (8, 16)
    md = (tmp_path / "out" / "recommendation.md").read_text()
    # ranking: both ok configurations re-run twice, their means with intervals
    assert "## Ranking: the fastest configurations re-measured" in md
    assert sum(line.startswith("rank round") for line in said) == 4
    # the bottleneck: the data path alone per worker count (0 always, the host's ladder), the step alone
    assert c["headline"].startswith("the data path delivers at most ") and "the step could take " in c["headline"]
    assert "- data path alone (samples/s by workers, no model): 0: " in md and "- step alone (a batch kept" in md
    assert "Bound: " in md and "What could help:" in md
    # verification against the plain default (batch 32, 0 workers, fp32), alternating repeats, an interval
    assert result.verification is not None and len(result.verification.baseline.samples_per_s) == 2
    assert result.verification.baseline.params["batch_size"] == 32 and result.verification.low is not None
    assert "**speedup** (recommended / baseline)" in md and c["speedup"][0] == result.verification.speedup
    assert (tmp_path / "out" / "recommendation.yaml").read_text().startswith("# perflab sweep: ")
    parent = MlflowClient(uri).get_run(result.parent_run_id).data.metrics
    assert parent["bottleneck_step_samples_per_s"] == c["bottleneck"]["step_samples_per_s"] > 0
    assert parent["verified_speedup"] == result.verification.speedup


def test_list_options_take_the_forms_users_type() -> None:
    assert join_list_values(["--batch-sizes", "128", "256", "--steps", "3"]) == ["--batch-sizes", "128,256",
                                                                                 "--steps", "3"]  # fmt: skip
    assert join_list_values(["--batch-sizes", "128,256", "--num-workers", "0", "4"]) == [
        "--batch-sizes", "128,256", "--num-workers", "0,4"]  # fmt: skip
    assert join_list_values(["--grad-accum=1", "2", "--workload", "x.py:make"]) == [
        "--grad-accum", "1,2", "--workload", "x.py:make"]  # fmt: skip
    assert join_list_values(["--batch-sizes", "64 128"]) == ["--batch-sizes", "64 128"]  # quoted: parsed later
    # a negative count is a value (refused by the config, naming it), not click's "No such option: -1"
    assert join_list_values(["--num-workers", "-1", "--steps", "3"]) == ["--num-workers", "-1", "--steps", "3"]


def test_the_command_takes_space_separated_lists(images: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from perflab.cli import app

    args = ["sweep", "run", "--workload", JOB, "--data-path", images, "--batch-sizes", "8", "16", "--num-workers",
            "0", "--steps", "1", "--warmup", "0", "--verify-repeats", "0", "--no-track", "--device", "cpu",
            "--storage", f"sqlite:///{tmp_path / 'o.db'}", "--out", str(tmp_path / "out")]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--config", str(Path(__file__).parent / "fixtures" / "quick.yaml")])
    assert result.exit_code == 0, result.output
    table = (tmp_path / "out" / "results.csv").read_text()
    assert sorted(int(line.split(",")[1]) for line in table.splitlines()[1:]) == [8, 8, 16, 16]  # AMP off/on
    bad = CliRunner().invoke(app, ["sweep", "run", "--batch-sizes", "8", "x"])
    assert bad.exit_code != 0 and "--batch-sizes '8,x' is not a list of integers" in str(bad.exception)
