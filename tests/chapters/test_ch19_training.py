"""Chapter 19's dynamic int8 and FP8 training (chapters/ch19/training.py): the FP8 autograd function's
gradients against bf16 autograd, and the accuracy each pair's tolerance rests on (with its margin)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import context, make_context, set_context
from chapters.ch19 import training as T
from tests.session import slow_for

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "ch19"  # for the interpreted fixture


@pytest.mark.parametrize("recipe", sorted(T.RECIPES))
def test_fp8_matmul_forward_and_gradients_track_bf16(recipe: str) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 64, generator=g).bfloat16().requires_grad_()
    w = (torch.randn(32, 64, generator=g) / 8).bfloat16().requires_grad_()
    up = torch.randn(48, 32, generator=g).bfloat16()
    y = T.RECIPES[recipe].apply(x, w)
    (y.float() * up.float()).sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    ref = x.float() @ w.float().t()
    (ref * up.float()).sum().backward()
    for out, exact in ((y, ref), (gx, x.grad), (gw, w.grad)):
        err = float((out.detach().float() - exact.detach().float()).norm() / exact.detach().float().norm())
        assert 0 < err < 0.1  # FP8 (e5m2 gradients in tensorwise: 2 mantissa bits) is not exact, and not far off


def test_to_fp8_scales_rows_by_powers_of_two() -> None:
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(0)).bfloat16()
    x[3] *= 1000  # an outlier row takes no precision from the others: one scale per row
    q, inv = T.to_fp8(x, -1)
    assert inv.shape == (16, 1) and inv.dtype == torch.float32
    assert torch.equal(torch.exp2(torch.round(torch.log2(inv))), inv)  # powers of two
    top = q.float().abs().amax(dim=1)
    assert bool(((top > 224) & (top <= 448)).all())  # each row's max within a factor 2 of e4m3's largest
    err = float((q.float() * inv - x.float()).norm() / x.float().norm())
    assert err < 0.04


# rowwise scaling in the full tier only (12 s of the fast tier); tensorwise trains the same block in the fast one.
# It compiles: on the process of chapter 14's compiling tests, whose first compile it finds done (9.6 s alone, 3.0 s
# there)
@pytest.mark.xdist_group("inductor")
@pytest.mark.parametrize("recipe", slow_for(sorted(T.RECIPES), {"rowwise"}))
def test_fp8_training_final_loss_within_tolerance_and_training_shows(cpu_smoke: None, recipe: str) -> None:
    losses, outputs = {}, {}
    for fp8 in (False, True):
        b = T.BlockTraining(fp8, recipe)
        b.setup()
        b.benchmark_fn()
        losses[fp8], outputs[fp8] = b.losses.clone(), b.get_output().clone()
    assert torch.equal(outputs[True], losses[True][-1:])  # the pair compares the final (held-out) loss
    final = float((outputs[True] - outputs[False]).abs() / outputs[False])
    assert 0 < final < T.RTOL_FP8_TRAINING / 2  # the tolerance keeps a 2x margin over what the CPU measures
    worst = float(((losses[True] - losses[False]).abs() / losses[False]).max())
    assert worst < T.RTOL_FP8_TRAINING  # not verified by the pair, checked here: every step within 1 %
    assert losses[False][-1] < 0.9 * losses[False][0]  # training lowers the held-out loss by > 10 %


@pytest.mark.slow  # two set-ups, each tracing the block's graphs: ~24 s on the 2-core CPU host
def test_fp8_training_records_its_curve_in_the_first_round_only() -> None:
    """A later round's child (``timing_only``) skips the untimed call whose per-step losses only the first round's
    result keeps; its timed call computes the same."""
    outputs = {}
    for timing_only in (False, True):
        set_context(make_context(resolve_config({"device": "cpu", "smoke": True}), timing_only=timing_only))
        try:
            b = T.BlockTraining(False)
            calls: list[int] = []
            timed = b.benchmark_fn
            b.benchmark_fn = lambda calls=calls, timed=timed: (calls.append(1), timed())  # type: ignore[method-assign]
            b.setup()
            assert len(calls) == (0 if timing_only else 1)
            assert ("losses" in context().sizes) is not timing_only
            timed()
            outputs[timing_only] = b.losses.clone()
        finally:
            set_context(None)
    assert torch.equal(outputs[False], outputs[True])


def test_fp8_training_learning_rate_scales_with_width() -> None:
    assert T.lr(64) == T.lr(256) == 1e-3
    assert T.lr(8192) == 1e-3 * 256 / 8192  # 1 / width (muP), under a 70B run's 1.5e-4 peak


def test_dynamic_int8_error_within_tolerance(
    cpu_smoke: None, interpreted: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("quantize_int8_activations", "int8_matmul"):  # its Triton kernels, interpreted on the CPU
        monkeypatch.setattr(T, name, getattr(interpreted["common"], name))
    outs = {}
    for cls in (T.DecodeBatch, T.DynamicInt8):
        v = cls()
        v.setup()
        v.benchmark_fn()
        outs[cls] = v.get_output().float()
    err = float((outs[T.DynamicInt8] - outs[T.DecodeBatch]).norm() / outs[T.DecodeBatch].norm())
    assert 0 < err < T.RTOL_DYNAMIC / 2
