"""PolyNorm, fused multiply + PolyNorm and its grouped (MoE) form vs the eager reference: outputs, input,
weight and bias gradients, through the Triton interpreter."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
import triton  # noqa: F401  (imported first without the interpreter, as in the full suite)

from kernels.case import CASES, DTYPES, Shape
from kernels.check import check

CPU = torch.device("cpu")
# hidden not a power of two (masked tail), one row, rows not a power of two
SHAPES = [Shape(2, 3, 37), Shape(1, 1, 64), Shape(3, 7, 130)]
POLY_CASES = ["poly", "mul_poly", "grouped_mul_poly"]
# The largest shape in half precision is in the full tier only: 4-5 s each in the interpreter (whose PolyNorm
# reduction runs in Python), where fp32 at that shape and each dtype at the smaller two cover its parts
SHAPE_DTYPES = [pytest.param(s, d, id=f"{s}-{d}", marks=[pytest.mark.slow] if s == SHAPES[-1] and d != "fp32" else [])
                for s in SHAPES for d in ("fp32", "fp16", "bf16")]  # fmt: skip


@pytest.mark.parametrize(("shape", "dtype"), SHAPE_DTYPES)
@pytest.mark.parametrize("case", POLY_CASES)
def test_triton_matches_reference(poly: ModuleType, case: str, shape: Shape, dtype: str) -> None:
    result = check(CASES[case], "triton", shape, DTYPES[dtype], CPU, seed=shape.hidden)
    assert result.ok, str(result)


@pytest.mark.parametrize("segment_rows", [128, 8])
def test_grouped_with_few_experts(poly: ModuleType, monkeypatch: pytest.MonkeyPatch, segment_rows: int) -> None:
    """Three experts over 60 rows (21, 19 and 20 of them): every expert spans many rows; in 8-row tiles its dw/db
    sum takes three, the last one masked, in 128-row tiles one."""
    monkeypatch.setattr(poly, "SEGMENT_ROWS", segment_rows)
    result = check(poly.GroupedMulPolyNormCase(experts=3), "triton", Shape(1, 60, 37), torch.float32, CPU)
    assert result.ok, str(result)


def test_grouped_expert_without_tokens(poly: ModuleType) -> None:
    """Offsets with an empty expert (1) and boundary rows: each row uses its own expert's weights; the
    empty expert's gradients are exactly zero."""
    gen = torch.Generator().manual_seed(3)
    ref = poly._randomized(poly.GroupedMulPolyNorm(4, torch.float32, CPU), gen)
    mod = poly.GroupedMulPolyNormCase().custom(ref)
    x, y = (torch.randn(12, 37, generator=gen).requires_grad_() for _ in range(2))
    offsets = torch.tensor([5, 5, 9, 12], dtype=torch.int32)
    up = torch.randn(12, 37, generator=gen)
    want = torch.autograd.grad(ref(x, y, offsets), [x, y, *ref.parameters()], up)
    out = mod(x, y, offsets)
    got = torch.autograd.grad(out, [x, y, *mod.parameters()], up)
    torch.testing.assert_close(out, ref(x, y, offsets), atol=1e-5, rtol=1e-5)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    assert got[2][1].eq(0).all() and got[3][1] == 0


def test_weights_are_random_and_all_checked(poly: ModuleType) -> None:
    ref = CASES["mul_poly"].reference(37, torch.float32, CPU, torch.Generator().manual_seed(0))
    assert [n for n, _ in ref.named_parameters()] == ["weight", "bias"]
    assert ref.bias.abs().item() > 0 and len(set(ref.weight.tolist())) == 3


def test_dropped_bias_gradient_is_caught(poly: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    real = poly.poly_backward

    def no_db(*args):  # type: ignore[no-untyped-def]
        dx, dy, dw, db = real(*args)
        return dx, dy, dw, torch.zeros_like(db)

    monkeypatch.setattr(poly, "poly_backward", no_db)
    result = check(CASES["poly"], "triton", Shape(2, 3, 37), torch.float32, CPU)
    assert [p.split(":")[0] for p in result.problems] == ["grad bias"]


def test_swapped_weights_are_caught(poly: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel pairing w0 with x instead of x³: the output and every gradient but the bias's differ."""
    real = poly.poly_forward
    monkeypatch.setattr(poly, "poly_forward", lambda x, y, w, b, offs, eps: real(x, y, w.flip(-1), b, offs, eps))
    result = check(CASES["mul_poly"], "triton", Shape(2, 3, 37), torch.float32, CPU, directions=("fwd",))
    assert [p.split(":")[0] for p in result.problems] == ["output[0]"]


def test_offsets_have_no_gradient_entry(poly: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Problems are named by the inputs that have gradients: a wrong dy is 'grad input[1]', and the
    offsets (input 2, integer) are never compared as a gradient."""
    real = poly.poly_backward

    def wrong_dy(*args):  # type: ignore[no-untyped-def]
        dx, dy, dw, db = real(*args)
        return dx, 2 * dy, dw, db

    monkeypatch.setattr(poly, "poly_backward", wrong_dy)
    result = check(CASES["grouped_mul_poly"], "triton", Shape(1, 9, 37), torch.float32, CPU)
    assert [p.split(":")[0] for p in result.problems] == ["grad input[1]"]


def test_compiled_grouped_form_matches_the_loop(poly: ModuleType) -> None:
    """torch.compile gets the loop-free grouped form; eagerly it equals the per-expert loop, outputs and
    gradients, an empty expert and a 3-expert routing included."""
    gen = torch.Generator().manual_seed(5)
    case = poly.GroupedMulPolyNormCase(experts=4)
    ref = case.reference(37, torch.float32, CPU, gen)
    gathered = case.compilable(ref)
    assert isinstance(gathered, poly.GatheredMulPolyNorm)
    x, y = (torch.randn(12, 37, generator=gen).requires_grad_() for _ in range(2))
    offsets = torch.tensor([5, 5, 9, 12], dtype=torch.int32)
    up = torch.randn(12, 37, generator=gen)
    want_out, got_out = ref(x, y, offsets), gathered(x, y, offsets)
    torch.testing.assert_close(got_out, want_out)
    want = torch.autograd.grad(want_out, [x, y, *ref.parameters()], up)
    got = torch.autograd.grad(got_out, [x, y, *gathered.parameters()], up)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_compiled_grouped_form_accumulates_parameter_gradients_in_fp32(poly: ModuleType) -> None:
    """bf16, ~500 tokens per expert: the gather's backward (a scatter-add per row) must not sum the rows'
    weight and bias gradients in bf16 (the H100 check failed that way: dw off by up to 2); the loop
    reference reduces each expert's rows in fp32."""
    from kernels.check import tolerance

    gen = torch.Generator().manual_seed(7)
    case = poly.GroupedMulPolyNormCase(experts=4)
    ref = case.reference(64, torch.bfloat16, CPU, gen)
    gathered = case.compilable(ref)
    x, y, offsets = case.make_inputs(Shape(1, 2048, 64), torch.bfloat16, CPU, gen)
    x, y = x.requires_grad_(), y.requires_grad_()
    up = torch.randn(2048, 64, generator=gen).bfloat16()
    want = torch.autograd.grad(ref(x, y, offsets), list(ref.parameters()), up)
    got = torch.autograd.grad(gathered(x, y, offsets), list(gathered.parameters()), up)
    tol = tolerance(torch.bfloat16)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.bfloat16
        torch.testing.assert_close(g.float(), w.float(), rtol=tol, atol=tol)
