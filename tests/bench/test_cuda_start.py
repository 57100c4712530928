"""The host's CUDA-start lock (bench._child.host_lock, runner.cuda_lock_path) and what a child reports of
its CUDA start (VariantResult.cuda_start_s, cuda_lock_wait_s).

Two children that create their CUDA contexts at the same moment on two GPUs each take ~1.8x as long as
one alone (H200 x 2, session 6): children take the lock in turn. What must hold: a second holder waits
for the first, a holder that dies (killed on a stage limit) frees it at once, the lock is on unless
PERFLAB_CUDA_START_LOCK=0, and a GPU child reports how long its context and its wait took.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from bench._child import host_lock
from bench.discovery import VariantSpec
from bench.runner import cuda_lock_path, run_variant

HOLD = """
import sys, time
from bench._child import host_lock
with host_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path: Path, hold_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(hold_s)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_waits_for_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "cuda-start.lock"
    holder = _holder(lock, 0.8)
    t0 = time.monotonic()
    with host_lock(str(lock)) as waited:
        got = time.monotonic() - t0
    holder.wait(timeout=10)
    assert waited is not None and waited > 0.4 and got > 0.4, (waited, got)
    with host_lock(str(lock)) as again:  # free now: no wait
        assert again is not None and again < 0.2


def test_a_holder_killed_frees_the_lock_at_once(tmp_path: Path) -> None:
    lock = tmp_path / "cuda-start.lock"
    holder = _holder(lock, 60.0)
    os.kill(holder.pid, signal.SIGKILL)  # as the runner kills a child on its stage limit
    holder.wait(timeout=10)
    with host_lock(str(lock)) as waited:
        assert waited is not None and waited < 1.0
    assert oct(lock.stat().st_mode & 0o777) == "0o600"


def test_no_path_no_lock() -> None:
    with host_lock(None) as waited:
        assert waited is None


def test_the_lock_is_on_unless_switched_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    private = tmp_path / "rt"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("PERFLAB_RUNTIME_DIR", str(private))
    monkeypatch.delenv("PERFLAB_CUDA_START_LOCK", raising=False)
    assert cuda_lock_path() == str(private / "cuda-start.lock")
    for off in ("0", "off", "false"):
        monkeypatch.setenv("PERFLAB_CUDA_START_LOCK", off)
        assert cuda_lock_path() is None
    monkeypatch.setenv("PERFLAB_CUDA_START_LOCK", "1")
    private.chmod(0o755)  # a runtime directory others can enter: no lock there (and no crash)
    assert cuda_lock_path() is None


def _spec(path: Path) -> VariantSpec:
    return VariantSpec(chapter="ch01", example="a", variant="baseline", path=str(path))


def test_the_job_carries_the_lock_and_a_cpu_child_reports_no_cuda_start(
    tmp_path: Path, write_benchmark: Any
) -> None:
    bench = write_benchmark(tmp_path / "baseline_a.py")
    result = run_variant(_spec(bench), tmp_path / "wd", cli_layer={"device": "cpu", "warmup": 1, "iterations": 3})
    assert result.status == "ok", result.error
    job = json.loads((tmp_path / "wd" / "job.json").read_text())
    assert job["cuda_lock"] == cuda_lock_path() and job["cuda_lock"]
    assert result.cuda_start_s is None and result.cuda_lock_wait_s is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; torch.cuda.is_available() is False")
def test_a_gpu_child_reports_its_cuda_start(tmp_path: Path, write_benchmark: Any) -> None:
    bench = write_benchmark(tmp_path / "baseline_a.py")
    result = run_variant(_spec(bench), tmp_path / "wd", cli_layer={"device": "cuda", "warmup": 1, "iterations": 3})
    assert result.status == "ok", result.error
    # cuInit + a primary context: tens to hundreds of ms on an H100/H200 host, never nothing
    assert result.cuda_start_s is not None and 0.005 < result.cuda_start_s < 30.0
    assert result.cuda_lock_wait_s is not None and result.cuda_lock_wait_s >= 0.0
