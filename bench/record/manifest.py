"""Run manifests: what machine, software and settings produced a number.

The host part (git, Python, OS, selected environment variables, secrets redacted) is collected here, once
by the parent; the device part (GPU, clocks, driver, torch/CUDA/triton, numeric switches) by the child that
ran the variant (``bench.measure.machine.device_manifest``), after its setup, so a benchmark that flips TF32
in setup is recorded doing so (INTEGRITY #7).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Environment variables worth recording: they change kernels, allocators, threads or tracking.
_ENV_PREFIXES = (
    "CUDA_",
    "CUBLAS_",
    "CUDNN_",
    "NCCL_",
    "NVIDIA_",
    "TORCH",
    "PYTORCH_",
    "TRITON_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "MLFLOW_",
    "PERFLAB_",
    "HF_",
    "XLA_",
)
_ENV_EXACT = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CI", "HOSTNAME", "SLURM_JOB_ID")
# Any name suggesting a secret is redacted, whatever its prefix.
_SECRET_RE = re.compile(r"TOKEN|KEY|SECRET|PASS(WORD|WD)?|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION", re.I)
# A value that embeds credentials in a URI: scheme://user:password@host or scheme://token@host.
_URI_CREDENTIALS_RE = re.compile(r"://[^/@\s]+@")
REDACTED = "***redacted***"


def redact_uri(value: str) -> str:
    """``value`` with the credentials a URI in it embeds (``scheme://user:password@host``) replaced by ``REDACTED``."""
    return _URI_CREDENTIALS_RE.sub(f"://{REDACTED}@", value)


def redact_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Selected environment variables, secrets replaced by ``REDACTED``."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for name in sorted(env):
        if not (name.startswith(_ENV_PREFIXES) or name in _ENV_EXACT):
            continue
        value = env[name]
        if _SECRET_RE.search(name):
            out[name] = REDACTED
        else:
            out[name] = redact_uri(value)
    return out


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        # safe.directory: a checkout copied in by another user (CI, GPU hosts) is otherwise refused.
        done = subprocess.run(
            ["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_info(path: str | Path | None = None) -> dict[str, Any]:
    cwd = Path(path) if path else Path(__file__).resolve().parents[2]  # the repository holding bench/
    status = _git(["status", "--porcelain"], cwd)
    commit = _git(["rev-parse", "HEAD"], cwd)
    stated = os.environ.get("PERFLAB_GIT_COMMIT")
    if stated:
        # A copied working tree (e.g. a GPU host) has no history or a stale one (an H100 copy reported a
        # commit from hours before): the caller states the commit, and what git said is kept beside it.
        return {"commit": stated, "branch": None, "dirty": None, "source": "env", "git_reported": commit}
    return {
        "commit": commit,
        "branch": _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd),
        "dirty": bool(status) if status is not None else None,
    }


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The host CPU's model name (Linux's first ``model name``, else ``platform.processor()``): what a host-bound
    pair's speedup depends on as much as on the GPU."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or None


def host_manifest() -> dict[str, Any]:
    """Collected once per suite by the parent."""
    return {
        "git": git_info(),
        "python": sys.version.split()[0],
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_model(),
        "hostname": platform.node(),
        "packages": {p: _version(p) for p in ("torch", "triton", "mlflow", "numpy", "pydantic", "perflab")},
        "env": redact_env(),
    }
