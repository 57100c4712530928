"""Chapter 13's memory pairs (chapters/ch13/memory.py): recomputing or offloading activations changes no loss or
update; the fragmentation loop's sizes grow past every freed block; each declares its memory metric."""

from __future__ import annotations

import pytest
import torch

from bench.measure.memory import declared_metric
from chapters.ch13.memory import Activations, Fragmentation


def run(bench: object) -> list[torch.Tensor]:
    bench.setup()  # type: ignore[attr-defined]
    bench.benchmark_fn()  # type: ignore[attr-defined]
    return [t.clone() for t in bench.get_output()]  # type: ignore[attr-defined]


def test_checkpoint_and_offload_change_nothing_computed(cpu_smoke: None) -> None:
    keep = run(Activations("keep"))
    for mode in ("checkpoint", "offload"):
        for a, b in zip(run(Activations(mode)), keep, strict=True):
            assert torch.equal(a, b), mode


def test_memory_pairs_declare_their_metric() -> None:
    assert declared_metric(Activations("keep")) == "peak_memory"
    assert declared_metric(Fragmentation(expandable=True)) == "peak_reserved"
    with pytest.raises(ValueError, match="mode='recompute'"):
        Activations("recompute")


def test_fragmentation_requests_outgrow_every_freed_block(cpu_smoke: None) -> None:
    f = Fragmentation(expandable=False)
    out = run(f)[0]
    assert all(b > a for a, b in zip(f.rows, f.rows[1:], strict=False)) and f.rows[-1] == f.source.shape[0]
    assert torch.isfinite(out).all() and out.abs().min() > 0
