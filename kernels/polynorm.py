"""PolyNorm, fused multiply + PolyNorm, and grouped fused multiply + PolyNorm for MoE: Triton fwd and bwd.

PolyNorm (Zhuo et al., "Polynomial Composition Activations", arXiv:2411.03884) is a learned combination
of the first three powers of x, each RMS-normalized over the hidden dimension:

    poly(x) = w0·norm(x³) + w1·norm(x²) + w2·norm(x) + b,    norm(u) = u / sqrt(mean(u²) + eps),

three scalar weights and a scalar bias. ``mul_poly`` gates it, out = poly(x)·y (the SwiGLU slot: x the
gate projection, y the up projection). ``grouped_mul_poly`` runs that over MoE tokens sorted by expert:
``offsets`` holds the cumulative token counts, expert e owns rows offsets[e-1] .. offsets[e]-1 (from 0
for e = 0) and has its own (w, b); offsets[-1] must be the row count (not checked: that syncs the GPU).

What changes and why. The eager reference materializes x², x³, their squares, three row means, three
normalized tensors, the weighted sum (and the product): over a dozen passes over the activation, each
a kernel. Our forward reads x (and y) once and writes out once, plus three fp32 rstd per row for the
backward: bf16 4 bytes per element for poly, 6 gated. torch.compile fuses most of it too; against it
the kernel should win by staying one pass per direction, not by much.

Backward, per row, with n_k = x^k·r_k for the powers k = 3, 2, 1 (r_k the rstd of x^k, w the weight of
that power: w0, w1, w2) and g = dout (·y when gated):

    du_k = w·r_k·(g − n_k·mean(g·n_k)),   dx = 3x²·du₃ + 2x·du₂ + du₁,   dy = dout·poly(x),
    dw = (Σ g·n₃, Σ g·n₂, Σ g·n₁),   db = Σ g.

The row sums Σ g·n_k and Σ g are needed per row anyway (for du_k), so each program writes them to a
(rows, 4) fp32 buffer and dw, db are its column sums: a torch sum, or per expert a segment-sum kernel
when grouped. 16 bytes per row against 2·hidden·(3 or 5) bytes of activations; no atomics, so the
weight gradients are deterministic. Backward bytes: reads x and dout (and y), writes dx (and dy): bf16
6 bytes per element, 10 gated.

Statistics are fp32 inside the kernels; one program per row (kernels/common.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from kernels.case import Shape, is_fwd, register_case
from kernels.common import ActivationCase, launch_settings, retyped, row_sum

__all__ = ["GatheredMulPolyNorm", "GroupedMulPolyNorm", "MulPolyNorm", "PolyNorm", "TritonGroupedMulPolyNorm",
           "TritonMulPolyNorm", "TritonPolyNorm"]  # fmt: skip

EPS = 1e-6
EXPERTS = 48  # the MoE case of the issue: 48 experts, hidden 1280
SEGMENT_ROWS = 128  # rows per step of the per-expert dw/db sum


@triton.jit
def _expert_of(OFFS, row, E, EBLOCK: tl.constexpr):
    """The expert owning ``row``: how many cumulative counts are ≤ row (E ≤ EBLOCK ints, cached across
    programs). A row past offsets[-1] (a broken contract) is clamped to the last expert, never out of bounds."""
    e = tl.arange(0, EBLOCK)
    ends = tl.load(OFFS + e, mask=e < E, other=2147483647)
    return tl.minimum(row_sum((ends <= row).to(tl.int32)), E - 1)


@triton.jit
def _add3(a0, a1, a2, b0, b1, b2):
    return a0 + b0, a1 + b1, a2 + b2


@triton.jit
def _add4(a0, a1, a2, a3, b0, b1, b2, b3):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3


@triton.jit
def _fwd_kernel(X, Y, OUT, W, B, OFFS, RSTD, N, E, eps, HAS_MUL: tl.constexpr, GROUPED: tl.constexpr,
                BLOCK: tl.constexpr, EBLOCK: tl.constexpr):  # fmt: skip
    """One row: out = poly(x) (· y), and RSTD[row] = (rstd(x³), rstd(x²), rstd(x)).

    Reads x (and y) once, writes out once and 12 bytes of statistics. The three sums of squares are
    one multi-operand reduction (one trip through shared memory, not three)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    if GROUPED:
        e = _expert_of(OFFS, row, E, EBLOCK)
    else:
        e = 0
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    x2 = x * x
    x4 = x2 * x2
    m1, m2, m3 = tl.reduce((x2, x4, x4 * x2), 0, _add3)
    r3 = 1.0 / tl.sqrt(m3 / N + eps)
    r2 = 1.0 / tl.sqrt(m2 / N + eps)
    r1 = 1.0 / tl.sqrt(m1 / N + eps)
    tl.store(RSTD + row * 3, r3)
    tl.store(RSTD + row * 3 + 1, r2)
    tl.store(RSTD + row * 3 + 2, r1)
    w0 = tl.load(W + e * 3).to(tl.float32)
    w1 = tl.load(W + e * 3 + 1).to(tl.float32)
    w2 = tl.load(W + e * 3 + 2).to(tl.float32)
    p = ((w0 * r3 * x + w1 * r2) * x + w2 * r1) * x + tl.load(B + e).to(tl.float32)
    if HAS_MUL:  # the product is taken in fp32 and rounded once
        p = p * tl.load(Y + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(OUT + row * N + cols, p.to(OUT.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_kernel(DOUT, X, Y, W, B, OFFS, RSTD, DX, DY, PART, N, E, HAS_MUL: tl.constexpr, GROUPED: tl.constexpr,
                BLOCK: tl.constexpr, EBLOCK: tl.constexpr):  # fmt: skip
    """One row: dx (and dy = dout·poly(x)) from x, dout (y) and the saved rstd; PART[row] = (Σ g·n₃,
    Σ g·n₂, Σ g·n₁, Σ g), this row's share of dw and db.

    Reads x, dout (and y), writes dx (and dy) and 16 bytes of partial sums. Written so that only x and g
    live across the (single, four-operand) reduction: with s_k = Σ g·n_k,
    dx = g·(3w0·r₃·x² + 2w1·r₂·x + w2·r₁) − x·(c₃·x⁴ + c₂·x² + c₁),  c_k = k·w·r_k·s_k/N (the du_k terms
    of the module docstring expanded); fewer registers per element keep more rows in flight."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    offs = row * N + cols
    if GROUPED:
        e = _expert_of(OFFS, row, E, EBLOCK)
    else:
        e = 0
    w0 = tl.load(W + e * 3).to(tl.float32)
    w1 = tl.load(W + e * 3 + 1).to(tl.float32)
    w2 = tl.load(W + e * 3 + 2).to(tl.float32)
    r3 = tl.load(RSTD + row * 3)
    r2 = tl.load(RSTD + row * 3 + 1)
    r1 = tl.load(RSTD + row * 3 + 2)
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(DOUT + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_MUL:
        p = ((w0 * r3 * x + w1 * r2) * x + w2 * r1) * x + tl.load(B + e).to(tl.float32)
        tl.store(DY + offs, (g * p).to(DY.dtype.element_ty), mask=mask)
        g = g * tl.load(Y + offs, mask=mask, other=0.0).to(tl.float32)
    gx = g * x
    gx2 = gx * x
    t1, t2, t3, t0 = tl.reduce((gx, gx2, gx2 * x, g), 0, _add4)
    s3 = r3 * t3
    s2 = r2 * t2
    s1 = r1 * t1
    c3 = 3.0 * w0 * r3 * r3 * s3 / N
    c2 = 2.0 * w1 * r2 * r2 * s2 / N
    c1 = w2 * r1 * r1 * s1 / N
    x2 = x * x
    dx = g * ((3.0 * w0 * r3) * x2 + (2.0 * w1 * r2) * x + w2 * r1) - x * ((c3 * x2 + c2) * x2 + c1)
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)
    tl.store(PART + row * 4, s3)
    tl.store(PART + row * 4 + 1, s2)
    tl.store(PART + row * 4 + 2, s1)
    tl.store(PART + row * 4 + 3, t0)


@triton.jit
def _segment_sum_kernel(PART, OFFS, OUT, ROWS: tl.constexpr):
    """OUT[e] = Σ PART[r] over expert e's rows: its (dw0, dw1, dw2, db). One program per expert, reading
    its 16 bytes per row in tiles of ROWS rows (an expert with no tokens writes zeros)."""
    e = tl.program_id(0)
    start = tl.load(OFFS + e - 1, mask=e > 0, other=0)
    end = tl.load(OFFS + e)
    cols = tl.arange(0, 4)
    acc = tl.full((ROWS, 4), 0.0, tl.float32)
    for r0 in range(start, end, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        acc += tl.load(PART + rows[:, None] * 4 + cols[None, :], mask=(rows < end)[:, None], other=0.0)
    tl.store(OUT + e * 4 + cols, row_sum(acc))


def _launch(kernel: triton.JITFunction, x: torch.Tensor, offsets: torch.Tensor | None, *pointers: torch.Tensor,
            has_mul: bool, **scalars: float) -> None:  # fmt: skip
    """One program per row of ``x`` (rows, hidden), with the arguments both kernels share."""
    experts = offsets.numel() if offsets is not None else 1
    block, warps = launch_settings(x.shape[-1])
    kernel[(x.shape[0],)](*pointers, N=x.shape[-1], E=experts, **scalars, HAS_MUL=has_mul, GROUPED=offsets is not None,
                          BLOCK=block, EBLOCK=triton.next_power_of_2(experts), num_warps=warps)  # fmt: skip


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1]).contiguous()


def poly_forward(x: torch.Tensor, y: torch.Tensor | None, w: torch.Tensor, b: torch.Tensor,
                 offsets: torch.Tensor | None, eps: float) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(out, rstd (rows, 3) fp32). ``y`` None: PolyNorm alone; ``offsets`` None: one (w, b) for all rows."""
    x2 = _rows(x)
    y2 = _rows(y) if y is not None else x2
    out = torch.empty_like(x2)
    rstd = torch.empty((x2.shape[0], 3), dtype=torch.float32, device=x.device)
    offs = offsets if offsets is not None else rstd  # not read unless grouped
    _launch(_fwd_kernel, x2, offsets, x2, y2, out, w.contiguous(), b.contiguous(), offs, rstd, has_mul=y is not None,
            eps=eps)  # fmt: skip
    return out.view(x.shape), rstd


def poly_backward(dout: torch.Tensor, x: torch.Tensor, y: torch.Tensor | None, w: torch.Tensor, b: torch.Tensor,
                  offsets: torch.Tensor | None, rstd: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:  # fmt: skip
    """(dx, dy or None, dw, db) from the saved inputs and ``rstd``."""
    x2 = _rows(x)
    y2 = _rows(y) if y is not None else x2
    dx = torch.empty_like(x2)
    dy = torch.empty_like(y2) if y is not None else dx
    part = torch.empty((x2.shape[0], 4), dtype=torch.float32, device=x.device)
    offs = offsets if offsets is not None else rstd
    _launch(_bwd_kernel, x2, offsets, _rows(dout), x2, y2, w.contiguous(), b.contiguous(), offs, rstd, dx, dy, part,
            has_mul=y is not None)  # fmt: skip
    if offsets is None:
        sums = part.sum(0)
        dw, db = sums[:3], sums[3:]
    else:
        sums = torch.empty((offsets.numel(), 4), dtype=torch.float32, device=x.device)
        _segment_sum_kernel[(offsets.numel(),)](part, offsets, sums, ROWS=SEGMENT_ROWS)
        dw, db = sums[:, :3], sums[:, 3]
    return dx.view(x.shape), dy.view(y.shape) if y is not None else None, dw.to(w.dtype), db.to(b.dtype)


class _PolyNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor | None, w: torch.Tensor, b: torch.Tensor,  # type: ignore[override]
                offsets: torch.Tensor | None, eps: float) -> torch.Tensor:  # fmt: skip
        out, rstd = poly_forward(x, y, w, b, offsets, eps)
        ctx.save_for_backward(x, y, w, b, offsets, rstd)
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x, y, w, b, offsets, rstd = ctx.saved_tensors
        dx, dy, dw, db = poly_backward(dout, x, y, w, b, offsets, rstd)
        return dx, dy, dw, db, None, None


# ------------------------------------------------------------------------------ references (naive)


def poly_reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """poly(x) in fp32, term by term as written; ``w`` (3,) and ``b`` one scalar (or (1,)), or one
    (w, b) per row of a 2-D ``x``: (rows, 3) and (rows,)."""
    # a row's weights and bias broadcast over its hidden dimension
    xf, wf, bf = x.float(), w.float().unsqueeze(-2), b.float().unsqueeze(-1)

    def norm(u: torch.Tensor) -> torch.Tensor:
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)

    return wf[..., 0] * norm(xf.pow(3)) + wf[..., 1] * norm(xf.pow(2)) + wf[..., 2] * norm(xf) + bf


class PolyNorm(nn.Module):
    """Eager reference: w0·norm(x³) + w1·norm(x²) + w2·norm(x) + b, statistics in fp32."""

    def __init__(self, dtype: torch.dtype, device: torch.device, eps: float = EPS) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((3,), 1 / 3, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(1, dtype=dtype, device=device))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return poly_reference(x, self.weight, self.bias, self.eps).to(x.dtype)


class MulPolyNorm(PolyNorm):
    """Eager reference: PolyNorm(x) · y, the product in fp32, rounded once."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return (poly_reference(x, self.weight, self.bias, self.eps) * y.float()).to(x.dtype)


class GroupedMulPolyNorm(nn.Module):
    """Eager reference: per expert e, MulPolyNorm with (weight[e], bias[e]) on its rows; a Python loop."""

    def __init__(self, experts: int, dtype: torch.dtype, device: torch.device, eps: float = EPS) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((experts, 3), 1 / 3, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(experts, dtype=dtype, device=device))
        self.eps = eps

    def forward(self, x: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        chunks, start = [], 0
        for e, end in enumerate(offsets.tolist()):
            xe, ye = x[start:end], y[start:end]
            chunks.append((poly_reference(xe, self.weight[e], self.bias[e], self.eps) * ye.float()).to(x.dtype))
            start = end
        return torch.cat(chunks)


class GatheredMulPolyNorm(GroupedMulPolyNorm):
    """The grouped reference without the loop: each row's (w, b) gathered by its expert index. What
    torch.compile gets: compiling the loop specializes on every expert's token count, a recompile of a
    48-way unrolled graph (minutes) for every routing."""

    def forward(self, x: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(x.shape[0], device=x.device, dtype=offsets.dtype)
        expert = torch.searchsorted(offsets, rows, right=True).clamp_max(offsets.numel() - 1)
        # Gather from fp32 copies: the backward of a gather is a scatter-add of one gradient per row, which on
        # the 16-bit parameters themselves accumulates in 16 bits (H100, bf16, 256 tokens: dw off by up to 2
        # against the loop's fp32 reductions). The forward is unchanged: poly_reference works in fp32 anyway.
        w, b = self.weight.float()[expert], self.bias.float()[expert]
        return (poly_reference(x, w, b, self.eps) * y.float()).to(x.dtype)


class TritonPolyNorm(PolyNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _PolyNormFn.apply(x, None, self.weight, self.bias, None, self.eps)


class TritonMulPolyNorm(PolyNorm):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return _PolyNormFn.apply(x, y, self.weight, self.bias, None, self.eps)


class TritonGroupedMulPolyNorm(GroupedMulPolyNorm):
    def forward(self, x: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return _PolyNormFn.apply(x, y, self.weight, self.bias, offsets, self.eps)


def _randomized(module: nn.Module, gen: torch.Generator) -> nn.Module:
    """Weights near 1/3 and a bias near 0, random: a swapped weight or a dropped bias gradient shows."""
    with torch.no_grad():
        for p, (base, scale) in zip(module.parameters(), ((1 / 3, 0.1), (0.0, 0.1)), strict=True):
            p.copy_(base + scale * torch.randn(p.shape, generator=gen).to(p.device, p.dtype))
    return module


class PolyNormCase(ActivationCase):
    name = "poly"
    description = "PolyNorm: three RMS norms of x³, x², x combined in one pass: one read of x, one write"
    triton_module = TritonPolyNorm

    def bytes_per_call(self, shape: Shape, dtype: torch.dtype, direction: str) -> int:
        """M = batch·seq_len rows, N = hidden, e = element size; w has 3 elements, b 1.

        fwd: read x (M·N), w, b (4); write out (M·N)                      → (2·M·N + 4)·e
        bwd: read x, dout (2·M·N), w, b (4); write dx (M·N), dw, db (4) → (3·M·N + 8)·e"""
        m, n = shape.rows, shape.hidden
        return (2 * m * n + 4 if is_fwd(direction) else 3 * m * n + 8) * dtype.itemsize

    def reference(self, hidden: int, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> nn.Module:
        return _randomized(PolyNorm(dtype, device), gen)


class MulPolyNormCase(ActivationCase):
    name = "mul_poly"
    description = "PolyNorm(x) · y fused: reads x and y once, writes the product"
    n_inputs = 2
    triton_module = TritonMulPolyNorm

    def bytes_per_call(self, shape: Shape, dtype: torch.dtype, direction: str) -> int:
        """M = batch·seq_len rows, N = hidden, e = element size; w has 3 elements, b 1.

        fwd: read x, y (2·M·N), w, b (4); write out (M·N)                           → (3·M·N + 4)·e
        bwd: read x, y, dout (3·M·N), w, b (4); write dx, dy (2·M·N), dw, db (4) → (5·M·N + 8)·e"""
        m, n = shape.rows, shape.hidden
        return (3 * m * n + 4 if is_fwd(direction) else 5 * m * n + 8) * dtype.itemsize

    def reference(self, hidden: int, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> nn.Module:
        return _randomized(MulPolyNorm(dtype, device), gen)


class GroupedMulPolyNormCase(ActivationCase):
    """MoE tokens (batch·seq_len rows) routed uniformly at random to ``experts`` experts, sorted by expert.

    The sweep is over total tokens at hidden 1280; an expert may get no tokens (its gradients are zero)."""

    name = "grouped_mul_poly"
    description = "PolyNorm(x) · y per expert, tokens grouped by an offsets tensor: one kernel for all experts"
    sweep_shapes = tuple(Shape(1, 1024 << i, 1280) for i in range(7))  # 1024 .. 65536 tokens
    n_inputs = 2
    triton_module = TritonGroupedMulPolyNorm

    def __init__(self, experts: int = EXPERTS) -> None:
        self.experts = experts

    def make_inputs(self, shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator
                    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        x, y = super().make_inputs(shape, dtype, device, gen)
        expert = torch.randint(self.experts, (shape.rows,), generator=gen)
        offsets = torch.bincount(expert, minlength=self.experts).cumsum(0).to(device, torch.int32)
        return x, y, offsets

    def bytes_per_call(self, shape: Shape, dtype: torch.dtype, direction: str) -> int:
        """M = tokens (batch·seq_len rows), N = hidden, e = element size, X = experts; per expert w has 3
        elements and b 1; the offsets are X int32 (4 bytes each), read in both directions.

        fwd: read x, y (2·M·N), w, b (4·X), offsets; write out (M·N)              → (3·M·N + 4·X)·e + 4·X
        bwd: read x, y, dout (3·M·N), w, b (4·X), offsets; write dx, dy (2·M·N), dw, db (4·X)
                                                                                   → (5·M·N + 8·X)·e + 4·X"""
        m, n, x = shape.rows, shape.hidden, self.experts
        elems = 3 * m * n + 4 * x if is_fwd(direction) else 5 * m * n + 8 * x
        return elems * dtype.itemsize + x * torch.int32.itemsize

    def reference(self, hidden: int, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> nn.Module:
        return _randomized(GroupedMulPolyNorm(self.experts, dtype, device), gen)

    def compilable(self, reference: nn.Module) -> nn.Module:
        return retyped(reference, GatheredMulPolyNorm)


register_case(PolyNormCase())
register_case(MulPolyNormCase())
register_case(GroupedMulPolyNormCase())
