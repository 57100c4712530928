"""Memory accounting: the variant's own peak, without the harness's L2-flush buffer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.define.result import VariantSpec
from bench.isolate.runner import run_variant

ALLOC = """
import torch
from bench.define.context import context

class Alloc:
    def setup(self):
        self.x = torch.randn(16 * 2**20, device=context().device)  # 64 MiB
        self.out = torch.empty_like(self.x)                          # 64 MiB

    def benchmark_fn(self):
        torch.mul(self.x, 2.0, out=self.out)

    def teardown(self):
        del self.x, self.out

    def get_output(self):
        return self.out

def get_benchmark():
    return Alloc()
"""


def _run(tmp_path: Path, device: str) -> object:
    path = tmp_path / "ch98" / "baseline_alloc.py"
    path.parent.mkdir(parents=True)
    path.write_text(ALLOC)
    spec = VariantSpec(chapter="ch98", example="alloc", variant="baseline", path=str(path))
    return run_variant(spec, tmp_path / "wd", cli_layer={"device": device, "iterations": 3, "warmup": 1})


def test_cpu_memory_is_the_child_peak_rss(tmp_path: Path) -> None:
    r = _run(tmp_path, "cpu")
    assert r.status == "ok", r.error
    # Peak RSS includes the interpreter and torch, and at least the 128 MiB the benchmark holds.
    assert r.memory.device == "cpu" and r.memory.peak_mb == r.memory.rss_peak_mb and r.memory.peak_mb > 128


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; torch.cuda.is_available() is False")
def test_cuda_peak_excludes_the_l2_flush_buffer(tmp_path: Path) -> None:
    r = _run(tmp_path, "cuda")
    assert r.status == "ok", r.error
    l2_mb = torch.cuda.get_device_properties(0).L2_cache_size / 2**20
    assert r.memory.harness_mb == pytest.approx(2 * l2_mb)
    # 128 MiB of inputs/outputs; the temporaries of randn add at most a few MiB.
    assert 128 <= r.memory.peak_mb < 140, r.memory
