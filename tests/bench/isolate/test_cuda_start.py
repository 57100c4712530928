"""What a child reports of its CUDA start (VariantResult.cuda_start_s; MLflow metric ``cuda_start_s``).

Creating a CUDA context is most of a variant's fixed cost on a GPU host, and on a host with several
GPUs the driver serialises it across them (docs/design.md, Known limits): each variant records how long its
own took, so a slow start shows in the run rather than hiding in its set-up stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench.define.discovery import VariantSpec
from bench.isolate.runner import run_variant
from bench.record.contract import variant_metrics


def _spec(path: Path) -> VariantSpec:
    return VariantSpec(chapter="ch01", example="a", variant="baseline", path=str(path))


def test_a_cpu_child_reports_no_cuda_start(tmp_path: Path, write_benchmark: Any) -> None:
    bench = write_benchmark(tmp_path / "baseline_a.py")
    result = run_variant(_spec(bench), tmp_path / "wd", cli_layer={"device": "cpu", "warmup": 1, "iterations": 3})
    assert result.status == "ok", result.error
    assert result.cuda_start_s is None
    assert "cuda_start_s" not in variant_metrics(result)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; torch.cuda.is_available() is False")
def test_a_gpu_child_reports_its_cuda_start(tmp_path: Path, write_benchmark: Any) -> None:
    bench = write_benchmark(tmp_path / "baseline_a.py")
    result = run_variant(_spec(bench), tmp_path / "wd", cli_layer={"device": "cuda", "warmup": 1, "iterations": 3})
    assert result.status == "ok", result.error
    # cuInit + a primary context: tens to hundreds of ms on an H100/H200 host, never nothing
    assert result.cuda_start_s is not None and 0.005 < result.cuda_start_s < 30.0
    assert variant_metrics(result)["cuda_start_s"] == pytest.approx(result.cuda_start_s)
    setup = next(s for s in result.stages if s.name == "setup")
    assert setup.duration_s is not None and setup.duration_s >= result.cuda_start_s  # inside the set-up stage
