"""Chapter 17's MoE layers (chapters/ch17/moe.py): the loop over experts, the grouped GEMM and the dispatch padded to
the busiest expert's load give the same layer output as a float64 reference, idle experts included; the tilted
router is imbalanced, and the padded dispatch multiplies experts x max-load rows."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from bench.define.context import context
from chapters.ch17.moe import MoE, SkewedMoE


def reference(m: MoE) -> torch.Tensor:
    """Every token through its top-k experts in float64, weighted by the router's softmax."""
    ids, weights = m.route()
    x, out = m.x.double(), torch.zeros(m.x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(m.k):
            e = int(ids[t, j])
            out[t] += weights[t, j].double() * (F.gelu(x[t] @ m.w1[e].double()) @ m.w2[e].double())
    return out


def both_near_float64(cls: type, flags: tuple[bool, bool]) -> tuple[list[torch.Tensor], Any]:
    """Each side's output (``cls(flag)`` set up and called once), each within 1 % of the float64 reference; the
    outputs and the last side's object."""
    outs = []
    for flag in flags:
        m = cls(flag)
        m.setup()
        m.benchmark_fn()
        outs.append(m.get_output().clone())
    ref = reference(m)
    for out in outs:
        assert float((out.double() - ref).norm() / ref.norm()) < 1e-2
    return outs, m


@pytest.mark.parametrize("experts", [8, 40])  # 40 experts for 37 x 2 picks: some experts get no token
def test_loop_and_grouped_match_float64(cpu_smoke: None, experts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MoE, "SMOKE", (37, 32, 24, experts, 2))
    outs, m = both_near_float64(MoE, (False, True))
    assert torch.equal(outs[0], outs[1])  # on the CPU: the same rows, products and order of sums
    if experts == 40:
        assert int(torch.bincount(m.route()[0].flatten(), minlength=40).eq(0).sum()) > 0


@pytest.mark.parametrize("experts", [8, 40])
def test_padded_and_grouped_match_float64_under_a_skewed_router(
    cpu_smoke: None, experts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SkewedMoE, "SMOKE", (37, 32, 24, experts, 2))
    outs, m = both_near_float64(SkewedMoE, (True, False))
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-2, atol=1e-2)
    counts = torch.bincount(m.route()[0].flatten(), minlength=experts)
    share = context().sizes["max_expert_share"]
    assert share == pytest.approx(float(counts.max() / counts.float().mean()), abs=1e-3) and share > 2.5
    assert context().sizes["padding_factor"] == pytest.approx(experts * int(counts.max()) / (37 * 2), abs=1e-3)


def test_the_padded_dispatch_multiplies_the_capacity(cpu_smoke: None, monkeypatch: pytest.MonkeyPatch) -> None:
    m = SkewedMoE(padded=True)
    m.setup()
    shapes: list[tuple[int, ...]] = []
    real_bmm = torch.bmm
    monkeypatch.setattr(torch, "bmm", lambda a, b: shapes.append(tuple(a.shape)) or real_bmm(a, b))
    m.benchmark_fn()
    capacity = int(torch.bincount(m.route()[0].flatten(), minlength=m.experts).max())
    assert [s[:2] for s in shapes] == [(m.experts, capacity)] * 2
