"""bench/record/manifest.py: what produced a number is recorded, secrets are not, and no switch is flipped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.measure.machine import device_manifest
from bench.record.manifest import REDACTED, cpu_model, git_info, host_manifest, redact_env

REPO = Path(__file__).resolve().parents[3]

SECRETS = {
    "PERFLAB_API_TOKEN": "tok-5ecret-perflab",
    "MLFLOW_TRACKING_PASSWORD": "pw-5ecret-mlflow",
    "TRITON_SECRET_KEY": "key-5ecret-triton",
    "HF_TOKEN": "hf_5ecret",
    "CUDA_AUTH_COOKIE": "cookie-5ecret",
}


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "postgresql://user:hunter2@host/db")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("UNRELATED_VARIABLE", "not-recorded")


def test_host_manifest_hides_planted_secrets(planted: None) -> None:
    text = json.dumps(host_manifest())
    for value in [*SECRETS.values(), "hunter2"]:
        assert value not in text
    env = host_manifest()["env"]
    for name in SECRETS:
        assert env[name] == REDACTED  # recorded as present, value hidden
    assert env["MLFLOW_TRACKING_URI"] == f"postgresql://{REDACTED}@host/db"  # host kept, credentials gone
    assert env["CUDA_VISIBLE_DEVICES"] == "3,1"
    assert env["OMP_NUM_THREADS"] == "4"
    assert "UNRELATED_VARIABLE" not in env


def test_token_only_uri_userinfo_is_redacted() -> None:
    env = redact_env({"MLFLOW_TRACKING_URI": "https://tok3n-5ecret@mlflow.example/x"})
    assert env["MLFLOW_TRACKING_URI"] == f"https://{REDACTED}@mlflow.example/x"


def test_redact_env_on_a_mapping() -> None:
    env = redact_env(
        {
            "MLFLOW_TRACKING_URI": "https://alice:s3cr3t@mlflow.example/",
            "PERFLAB_CHAPTERS_DIR": "/srv/chapters",
            "LD_LIBRARY_PATH": "/usr/lib",
            "AWS_SECRET_ACCESS_KEY": "aws-secret",  # no recorded prefix: not recorded at all
            "NCCL_PASSWD": "x",
        }
    )
    assert env == {
        "LD_LIBRARY_PATH": "/usr/lib",
        "MLFLOW_TRACKING_URI": f"https://{REDACTED}@mlflow.example/",
        "NCCL_PASSWD": REDACTED,
        "PERFLAB_CHAPTERS_DIR": "/srv/chapters",
    }


def test_host_manifest_records_software() -> None:
    m = host_manifest()
    assert m["python"] == sys.version.split()[0]
    assert m["packages"]["torch"].startswith(torch.__version__.split("+")[0])
    assert set(m["git"]) == {"commit", "branch", "dirty"}


def test_cpu_model_is_the_first_model_name(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD  EPYC 9654 96-Core Processor\n"
                    "processor\t: 1\nmodel name\t: something else\n")  # fmt: skip
    assert cpu_model(str(info)) == "AMD EPYC 9654 96-Core Processor"
    assert host_manifest()["cpu"] == cpu_model()


def _has_history(path: Path) -> bool:
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True
    )
    return done.returncode == 0


@pytest.mark.skipif(not _has_history(REPO), reason="this checkout has no git history (a copied working tree)")
def test_git_info_of_this_repo() -> None:
    info = git_info(REPO)
    assert set(info) == {"commit", "branch", "dirty"}
    assert info["commit"] is not None and re.fullmatch(r"[0-9a-f]{40}", info["commit"])
    assert isinstance(info["dirty"], bool)


def test_git_info_tracks_dirty_state(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q", "-b", "trunk")
    (tmp_path / "a.txt").write_text("1")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    clean = git_info(tmp_path)
    assert clean == {"commit": git("rev-parse", "HEAD").strip(), "branch": "trunk", "dirty": False}
    (tmp_path / "a.txt").write_text("2")
    assert git_info(tmp_path)["dirty"] is True


def test_git_info_outside_a_repo(tmp_path: Path) -> None:
    assert git_info(tmp_path) == {"commit": None, "branch": None, "dirty": None}


def test_device_manifest_records_numeric_switches() -> None:
    m = device_manifest(torch.device("cpu"))
    assert m["device"] == "cpu" and m["torch"] == torch.__version__
    n = m["numerics"]
    assert n["allow_tf32_matmul"] == torch.backends.cuda.matmul.allow_tf32
    assert n["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert n["deterministic_algorithms"] == torch.are_deterministic_algorithms_enabled()
    assert {"allow_tf32_cudnn", "cudnn_benchmark", "bf16_reduced_precision_reduction"} <= set(n)
    assert "gpu" not in m  # no GPU fields invented on a CPU device
    json.dumps(m)  # travels from child to parent as JSON


def test_device_manifest_sees_a_flipped_switch() -> None:
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        assert device_manifest(torch.device("cpu"))["numerics"]["float32_matmul_precision"] == "medium"
    finally:
        torch.set_float32_matmul_precision(before)


def test_importing_the_harness_flips_no_numeric_switch() -> None:
    # A fresh interpreter: this test process has imported bench long ago (INTEGRITY #7).
    code = """
import torch
def switches():
    return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision(),
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            torch.backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled())
before = switches()
import bench, bench.cli, bench.measure.compare, bench.record.manifest, bench.isolate.runner, bench.isolate.suite
import bench.record.summary, bench.measure.clocks
from bench.define.context import context
context()
after = switches()
assert before == after, (before, after)
print("unchanged", after)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "unchanged (False" in done.stdout  # TF32 off: torch's own default


def test_stated_git_commit_wins_and_git_view_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)  # a repository with no commits
    monkeypatch.setenv("PERFLAB_GIT_COMMIT", "abc123")
    info = git_info(tmp_path)
    assert info["commit"] == "abc123" and info["source"] == "env" and info["git_reported"] is None
    if _has_history(REPO):  # a copied tree's stale history must not override what the caller states
        info = git_info(REPO)
        assert info["commit"] == "abc123" and info["git_reported"] not in (None, "abc123")
    monkeypatch.delenv("PERFLAB_GIT_COMMIT")
    assert git_info(tmp_path)["commit"] is None and "source" not in git_info(tmp_path)
