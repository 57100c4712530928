"""Own workloads: the spec, one-line errors, and a real CPU sweep of sweeps/examples into MLflow (CI)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import torch
from mlflow import MlflowClient
from typer.testing import CliRunner

from bench.errors import ConfigError
from perflab.cli import app
from sweeps.api import TrialSettings, Workload
from sweeps.config import SweepConfig
from sweeps.examples import h5_dataset
from sweeps.runner import job_for
from sweeps.storage import default_storage
from sweeps.trial import run_trial
from sweeps.workload import WorkloadError, build_workload, load_function, parse_workload

SETTINGS = TrialSettings(batch_size=8, num_workers=0, pin_memory=False, amp=False, device="cpu", smoke=True)


def _file(tmp_path: Path, body: str, name: str = "job.py") -> Path:
    p = tmp_path / name
    p.write_text("import torch\nfrom sweeps.api import Workload\n\n" + body)
    return p


def _one_line(exc: pytest.ExceptionInfo[BaseException], *parts: str) -> None:
    text = str(exc.value)
    assert "\n" not in text, text
    for part in parts:
        assert part in text, text


def test_specs_resolve_builtins_modules_and_files(tmp_path: Path) -> None:
    assert parse_workload("cnn").builtin
    spec = parse_workload("sweeps.examples.mlp_tensors:make")
    assert (spec.kind, spec.target, spec.function) == ("module", "sweeps.examples.mlp_tensors", "make")
    f = _file(tmp_path, "def make(s):\n    return None\n")
    spec = parse_workload(f"{f}:make")
    assert spec.kind == "file" and spec.target == str(f)


def test_a_module_beside_the_sweep_imports_without_a_path_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "my_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    _file(pkg, "def make(s):\n    return None\n", "train.py")
    monkeypatch.chdir(tmp_path)
    spec = parse_workload("my_pkg.train:make")
    assert spec.root == str(tmp_path) and callable(__import__("my_pkg.train").train.make)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("nope", ("neither a built-in", "module:function")),
        ("no_such_pkg.train:make", ("cannot be imported", "No module named 'no_such_pkg'")),
        ("sweeps.examples.mlp_tensors:build", ("has no function 'build'", "make")),
        ("/does/not/exist.py:make", ("does not exist",)),
        ("sweeps.examples.mlp_tensors:1x", ("neither a built-in",)),
    ],
)
def test_unimportable_workloads_are_one_line(text: str, parts: tuple[str, ...]) -> None:
    with pytest.raises(WorkloadError) as err:
        parse_workload(text)
    _one_line(err, repr(text), *parts)


_ARGPARSE = (
    "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--lr', type=float, "
    "default=0.5)\n{extra}args = parser.parse_args()\n\ndef make(s):\n    return args.lr\n"
)


def test_a_script_parsing_its_arguments_at_import_reads_its_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["perflab", "sweep", "run", "--workload", "train.py:make"])
    f = _file(tmp_path, _ARGPARSE.format(extra=""), "train_defaults.py")
    assert load_function(parse_workload(f"{f}:make"))(SETTINGS) == 0.5  # not the sweep's argv: exit 2
    f = _file(tmp_path, _ARGPARSE.format(extra="parser.add_argument('--epochs', required=True)\n"), "train_req.py")
    with pytest.raises(WorkloadError) as err:
        parse_workload(f"{f}:make")
    _one_line(err, "exited while being imported (SystemExit: 2)", "if __name__ == '__main__'")


@pytest.mark.parametrize(
    ("body", "parts"),
    [
        ("def make(s):\n    raise KeyError('labels')\n", ("raised KeyError: 'labels'",)),
        ("def make(s):\n    return {'model': 1}\n", ("returned dict, not sweeps.api.Workload",)),
        ("def make(s):\n    m = torch.nn.Linear(2, 2)\n    return Workload(model=m, optimizer=None, loss_fn=None,"
         " dataset=[])\n", ("optimizer is a NoneType, not a torch.optim.Optimizer",)),
        ("def make(s):\n    m = torch.nn.Linear(2, 2)\n    o = torch.optim.SGD(torch.nn.Linear(2, 1).parameters())\n"
         "    return Workload(model=m, optimizer=o, loss_fn=torch.nn.MSELoss(), dataset=[])\n",
         ("holds none of the model's parameters",)),
        ("def make(s):\n    m = torch.nn.Linear(2, 2)\n    o = torch.optim.SGD(m.parameters(), 0.1)\n"
         "    return Workload(model=m, optimizer=o, loss_fn=torch.nn.MSELoss())\n", ("exactly one of dataset=",)),
        ("def make(s):\n    bs = s['batch_size']\n", ("not a dict: settings.batch_size",)),  # a dict-style job
    ],
)  # fmt: skip
def test_a_bad_workload_is_one_line(tmp_path: Path, body: str, parts: tuple[str, ...]) -> None:
    f = _file(tmp_path, body, f"bad{abs(hash(body))}.py")
    with pytest.raises(WorkloadError) as err:
        build_workload(parse_workload(f"{f}:make"), SETTINGS)
    _one_line(err, "workload", *parts)


_SMALL = "benchmark:\n  test_mixed_precision: false\n  rank_rounds: 0\n  probe: false\n  verify_repeats: 0\n"


def _small_sweep(tmp_path: Path, f: Path) -> object:
    """A 2-configuration grid (batch 8 and 16, no workers, no AMP), nothing after the trials but the recommendation."""
    (tmp_path / "small.yaml").write_text(_SMALL)
    return CliRunner().invoke(app, ["sweep", "run", "--workload", f"{f}:make", "--config", str(tmp_path / "small.yaml"),
                                    "--device", "cpu", "--no-track", "--batch-sizes", "8,16", "--num-workers", "0",
                                    "--steps", "2", "--warmup", "1", "--remeasure-seconds", "0"])  # fmt: skip


def test_a_sweep_stops_at_a_workload_raising_for_every_configuration_with_one_line(tmp_path: Path) -> None:
    """Every trial failing stops the sweep with one line naming the first trial's error (the one to fix first), once
    each trial, the last too, said on its own line why it failed."""
    f = _file(tmp_path, "def make(s):\n    raise ValueError(f'no data for batch {s.batch_size}')\n", "raising.py")
    result = _small_sweep(tmp_path, f)
    assert isinstance(result.exception, ConfigError), result.output
    study = optuna.load_study(study_name="perflab-sweep-raising-grid", storage=default_storage())
    assert [t.user_attrs["status"] for t in study.trials] == ["failed", "failed"]  # each configuration, once
    batches = [t.params["batch_size"] for t in study.trials]
    _one_line(pytest.ExceptionInfo.from_exc_info((type(result.exception), result.exception, None)),
              f"the first 2 trials failed and none ran; the first, trial 0 (bs={batches[0]} w=0): ",
              f"workload '{f}:make' raised ValueError: no data for batch {batches[0]} (fix the workload")  # fmt: skip
    flat = " ".join(result.output.split())  # a trial's line wraps at the console's width
    for number, batch in enumerate(batches):
        line = f"trial {number}: bs={batch} w=0 -> failed: workload '{f}:make' raised ValueError: no data for batch"
        assert f"{line} {batch}" in flat, result.output
    assert "Traceback" not in result.output and "Trial 0 failed" not in result.output


def test_a_workload_raising_for_one_configuration_fails_that_trial_only(tmp_path: Path) -> None:
    """make() raising for some settings (a batch its model cannot take) fails those trials; the rest still count."""
    body = ("def make(s):\n    if s.batch_size == 16:\n        raise ValueError('bug: batch 16')\n"
            "    m = torch.nn.Linear(4, 2)\n    ds = [(torch.randn(4), i % 2) for i in range(64)]\n"
            "    return Workload(model=m, optimizer=torch.optim.SGD(m.parameters(), 0.1),\n"
            "                    loss_fn=torch.nn.CrossEntropyLoss(), dataset=ds)\n")  # fmt: skip
    f = _file(tmp_path, body, "some_raise.py")
    result = _small_sweep(tmp_path, f)
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())  # a trial's line wraps at the console's width
    assert f"bs=16 w=0 -> failed: workload '{f}:make' raised ValueError: bug: batch 16" in flat, result.output
    assert "bs=8 w=0 -> ok" in result.output and "**recommended**: trial " in result.output, result.output
    assert result.output.split("**recommended**: trial ")[1].split(" — ")[0][1:] == ": bs=8 w=0", result.output
    study = optuna.load_study(study_name="perflab-sweep-some_raise-grid", storage=default_storage())
    errors = {t.params["batch_size"]: t.user_attrs.get("error", "") for t in study.trials}
    assert errors[8] == "" and "Traceback" in errors[16] and "bug: batch 16" in errors[16]  # where it raised, kept


def test_a_workload_raising_out_of_memory_for_a_batch_is_an_oom(tmp_path: Path) -> None:
    """make() raising RuntimeError('CUDA out of memory ...') at batch 16 was 'failed' (the same error in the step was
    'oom'): the larger batches were not skipped and the recommendation did not name the wall."""
    body = ("def make(s):\n    if s.batch_size == 16:\n        raise RuntimeError('CUDA out of memory. Tried to "
            "allocate 2.00 GiB')\n    m = torch.nn.Linear(4, 2)\n"
            "    ds = [(torch.randn(4), i % 2) for i in range(64)]\n"
            "    return Workload(model=m, optimizer=torch.optim.SGD(m.parameters(), 0.1),\n"
            "                    loss_fn=torch.nn.CrossEntropyLoss(), dataset=ds)\n")  # fmt: skip
    f = _file(tmp_path, body, "oom16.py")
    result = _small_sweep(tmp_path, f)
    assert result.exit_code == 0, result.output
    assert "trial 0: bs=16 w=0 -> oom" in result.output or "trial 1: bs=16 w=0 -> oom" in result.output, result.output
    flat = " ".join(result.output.split())  # a trial's line wraps at the console's width
    assert "-> oom: " in flat and "Tried to allocate 2.00 GiB" in flat, result.output  # its line says what ran out


@pytest.mark.slow  # a whole 2x2x2 sweep into MLflow (a sweep's one-line stops: above)
def test_own_workload_sweep_on_the_cpu_into_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI's own-workload sweep: the example module, a 2x2x2 grid, the verification, MLflow runs and pictures."""
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(name, raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)  # a sqlite store keeps its artifacts in ./mlruns: not in the checkout
    result = CliRunner().invoke(app, [
        "sweep", "run", "--workload", "sweeps.examples.mlp_tensors:make", "--device", "cpu", "--batch-sizes", "16,64",
        "--num-workers", "0,1", "--steps", "3", "--warmup", "1", "--verify-repeats", "2", "--remeasure-seconds", "0",
        "--baseline", "batch_size=16,num_workers=0", "--out", str(tmp_path / "out"),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "-> ok" in result.output and "## Verification" in result.output
    md = (tmp_path / "out" / "recommendation.md").read_text()
    assert "| baseline | bs=16 w=0 | 2 of 2 |" in md and "**speedup** (recommended / baseline): " in md
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("Default").experiment_id])
    parent = next(r for r in runs if r.data.tags.get("perflab.kind") == "sweep")
    trials = [r for r in runs if r.data.tags.get("perflab.kind") == "sweep-trial"]
    verified = {r.data.tags["perflab.role"]: r for r in runs if r.data.tags.get("perflab.kind") == "sweep-verify"}
    assert len(trials) == 8 and all(t.data.tags["perflab.status"] == "ok" for t in trials)  # 2 x 2 x AMP
    assert all(t.data.metrics["forward_ms"] > 0 and t.data.metrics["optimizer_ms"] > 0 for t in trials)
    assert set(verified) == {"baseline", "recommended"}
    for run in verified.values():
        m = run.data.metrics
        assert m["repeats_ok"] == 2 and m["samples_per_s_ci_low"] <= m["samples_per_s"] <= m["samples_per_s_ci_high"]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert verified["baseline"].data.params["batch_size"] == "16"
    assert "verified_speedup" in parent.data.metrics
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"history.png", "importance.png", "pareto.png", "batch_size.png", "results.csv"} <= names
    assert parent.data.params["workload"] == "sweeps.examples.mlp_tensors:make"


def test_a_users_hdf5_dataset_trains_in_workers(tmp_path: Path) -> None:
    path = tmp_path / "windows.h5"
    h5_dataset.write(path, n=96, channels=3, length=64, classes=4)
    cfg = SweepConfig(workload="sweeps.examples.h5_dataset:make", steps_per_test=3, warmup_steps=1)
    params = {"batch_size": 16, "num_workers": 2, "amp": True, "pin_memory": False, "grad_accum": 2,
              "channels_last": False, "compile": False, "prefetch_factor": 2, "persistent_workers": True}  # fmt: skip
    out = run_trial(job_for(cfg, parse_workload(cfg.workload), str(path), False, True, params), 120)
    assert out.status == "ok", out.error
    m = out.metrics
    assert m["workload_name"] == "1-D CNN on windows.h5" and m["samples_per_s"] > 0
    assert m["forward_ms"] > 0 and m["backward_ms"] > 0 and m["estimated_memory_gb"] > 0
    assert m["step_ms"] >= m["io_wait_ms"] >= 0


def test_workload_dataclasses_are_what_the_readme_documents() -> None:
    assert SETTINGS.micro_batch_size == 8 and SETTINGS.torch_amp_dtype() is torch.bfloat16
    assert {"model", "optimizer", "loss_fn", "dataset", "loader"} <= set(Workload.__dataclass_fields__)
