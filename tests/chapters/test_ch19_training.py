"""Chapter 19's dynamic int8 and FP8 training (chapters/ch19/training.py): the FP8 autograd function's
gradients against bf16 autograd, and the accuracy each pair's tolerance rests on (with its margin)."""

from __future__ import annotations

import torch

from chapters.ch19 import training as T


def test_fp8_matmul_forward_and_gradients_track_bf16() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 64, generator=g).bfloat16().requires_grad_()
    w = (torch.randn(32, 64, generator=g) / 8).bfloat16().requires_grad_()
    up = torch.randn(48, 32, generator=g).bfloat16()
    y = T.Fp8Matmul.apply(x, w)
    (y.float() * up.float()).sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    ref = x.float() @ w.float().t()
    (ref * up.float()).sum().backward()
    for out, exact in ((y, ref), (gx, x.grad), (gw, w.grad)):
        err = float((out.float() - exact.float()).norm() / exact.float().norm())
        assert 0 < err < 0.1  # FP8 (e5m2 for the gradients: 2 mantissa bits) is not exact, and not far off


def test_fp8_training_losses_within_tolerance_and_training_shows(cpu_smoke: None) -> None:
    losses = {}
    for fp8 in (False, True):
        b = T.BlockTraining(fp8)
        b.setup()
        b.benchmark_fn()
        losses[fp8] = b.get_output().clone()
    err = float((losses[True] - losses[False]).norm() / losses[False].norm())
    assert err < T.RTOL_FP8_TRAINING / 2  # the tolerance keeps a 2x margin over what the CPU measures
    worst = float(((losses[True] - losses[False]).abs() / losses[False]).max())
    assert 0 < worst < T.RTOL_FP8_TRAINING  # every step within 1 %, and FP8 not silently bf16
    assert losses[False][-1] < 0.9 * losses[False][0]  # training lowers the held-out loss by > 10 %


def test_dynamic_int8_error_within_tolerance(cpu_smoke: None) -> None:
    outs = {}
    for cls in (T.DecodeBatch, T.DynamicInt8):
        v = cls()
        v.setup()
        v.benchmark_fn()
        outs[cls] = v.get_output().float()
    err = float((outs[T.DynamicInt8] - outs[T.DecodeBatch]).norm() / outs[T.DecodeBatch].norm())
    assert 0 < err < T.RTOL_DYNAMIC / 2
