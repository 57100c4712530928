"""One ``perflab kernels`` command shared by the tests of its bandwidth lines and of its MLflow runs
(``kernels_cli`` in tests/kernels/conftest.py): the interpreter's PolyNorm makes each run ~25 s on a busy core at
both smoke shapes, so it times one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernels.case import Shape

# The xdist group of the tests that read the shared run: one process runs the command, once, for all of them
GROUP = "kernels_cli"
# The copy bandwidth the shared run finds cached for this host (GB/s)
COPY_GBPS = 10.0
# The one smoke shape the shared run times (``--max-shapes 1``: the largest of kernels.sweep.SMOKE_SHAPES)
SHAPE = Shape(1, 5, 64)


@dataclass(frozen=True)
class KernelsRun:
    """A ``perflab kernels`` command's output, its MLflow store and its save path."""

    output: str
    uri: str
    save_path: Path


def run_kernels(d: Path) -> KernelsRun:
    """``perflab kernels --case rms,poly`` at smoke size, its largest shape only (``SHAPE``; fp32, triton against
    naive, plots) into ``d``, logged to a SQLite MLflow store there, with a copy bandwidth of ``COPY_GBPS`` cached."""
    from typer.testing import CliRunner

    from bench.measure import ceilings as peaks
    from perflab.cli import app

    cache = d / "peaks.json"
    cache.write_text(json.dumps({peaks.cpu_key(): {"ceilings": {"copy_gbps": COPY_GBPS}}}))
    uri = f"sqlite:///{d / 'mlflow.db'}"
    args = ["kernels", "--case", "rms,poly", "--dtype", "fp32", "--provider", "triton", "--smoke", "--max-shapes",
            "1", "--plot", "--save-path", str(d / "o"), "--tracking-uri", uri]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFLAB_PEAK_CACHE", str(cache))
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return KernelsRun(result.output, uri, d / "o")
