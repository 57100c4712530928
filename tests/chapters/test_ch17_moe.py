"""Chapter 17's MoE routing (chapters/ch17/moe.py): the loop over experts and the grouped GEMM give the same
layer output as a float64 reference, idle experts included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from chapters.ch17.moe import MoE


def reference(m: MoE) -> torch.Tensor:
    """Every token through its top-k experts in float64, weighted by the router's softmax."""
    ids, weights = m.route()
    x, out = m.x.double(), torch.zeros(m.x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(m.k):
            e = int(ids[t, j])
            out[t] += weights[t, j].double() * (F.gelu(x[t] @ m.w1[e].double()) @ m.w2[e].double())
    return out


@pytest.mark.parametrize("experts", [8, 40])  # 40 experts for 37 x 2 picks: some experts get no token
def test_loop_and_grouped_match_float64(cpu_smoke: None, experts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MoE, "SMOKE", (37, 32, 24, experts, 2))
    outs = []
    for grouped in (False, True):
        m = MoE(grouped)
        m.setup()
        m.benchmark_fn()
        outs.append(m.get_output().clone())
    ref = reference(m)
    for out in outs:
        assert float((out.double() - ref).norm() / ref.norm()) < 1e-2
    assert torch.equal(outs[0], outs[1])  # on the CPU: the same rows, products and order of sums
    if experts == 40:
        assert int(torch.bincount(m.route()[0].flatten(), minlength=40).eq(0).sum()) > 0
