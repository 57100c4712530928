"""RMSNorm and fused residual-add + RMSNorm: Triton forward and backward.

What changes and why. The eager reference reads x, upcasts it, squares, reduces, multiplies by the
reciprocal root and by the weight as separate kernels: about five passes over the activation
(read x, write x², read x², read x again, write y). Our forward reads x once and writes y once (plus
one fp32 ``rstd`` per row for the backward): a fifth of the traffic, bandwidth-bound either way.
The fused add + RMSNorm also writes the sum, which the next residual branch needs, instead of
re-reading x and r for a separate add.

Backward, per row with x̂ = x·rstd and g = dy·w:  dx = rstd · (g − x̂ · mean(g·x̂)),  dw = Σ_rows dy·x̂.
dw is a reduction over rows: a grid of G programs each walks a contiguous block of rows, keeps its dw
partial in fp32 registers and writes one row of a (G, N) buffer; a torch sum finishes it (G ≪ rows,
no atomics, deterministic).

Statistics are fp32 inside the kernels; one program per row, BLOCK = next_power_of_2(hidden), masked
(kernels/common.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from kernels.case import Shape, is_fwd, register_case
from kernels.common import ActivationCase, launch_settings, row_sum

__all__ = ["AddRMSNorm", "RMSNorm", "TritonAddRMSNorm", "TritonRMSNorm"]

EPS = 1e-6


def reduction_programs(rows: int, device: torch.device) -> int:
    """Programs of the dw reduction: a few per SM on GPU, a handful on the CPU interpreter."""
    if device.type == "cuda":
        return min(rows, 4 * torch.cuda.get_device_properties(device).multi_processor_count)
    return min(rows, 4)


@triton.jit
def _fwd_kernel(X, R, S, Y, W, RSTD, N, eps, HAS_RES: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RES:
        # Added in fp32 (the interpreter cannot add bf16), then rounded to the storage dtype: the norm is
        # of the stored sum, exactly what an unfused add followed by a norm computes.
        s = (x + tl.load(R + row * N + cols, mask=mask, other=0.0).to(tl.float32)).to(S.dtype.element_ty)
        tl.store(S + row * N + cols, s, mask=mask)
        x = s.to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(row_sum(x * x) / N + eps)
    tl.store(RSTD + row, rstd)
    tl.store(Y + row * N + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_kernel(DY, DS, X, W, RSTD, DX, DW, M, N, rows_per_program, HAS_DS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.full((BLOCK,), 0.0, tl.float32)
    start = pid.to(tl.int64) * rows_per_program  # int64: rows x hidden may pass 2**31
    end = tl.minimum(start + rows_per_program, M)
    # Pointers advance a row per step (the loop counter is an int32 scalar in compiled code).
    offs = start * N + cols
    for row in range(start, end):
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + row)
        xhat = x * rstd
        g = dy * w
        dx = (g - xhat * (row_sum(g * xhat) / N)) * rstd
        if HAS_DS:  # the sum output's own gradient flows straight through to x and r
            dx += tl.load(DS + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)
        dw += dy * xhat
        offs += N
    tl.store(DW + pid * N + cols, dw, mask=mask)


def rms_forward(x: torch.Tensor, residual: torch.Tensor | None, w: torch.Tensor, eps: float
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """(normed, normalized input — the sum when fused, else x — and rstd per row, fp32)."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    s2 = torch.empty_like(x2) if residual is not None else x2
    r2 = residual.reshape(-1, n).contiguous() if residual is not None else x2
    y2 = torch.empty_like(x2)
    rstd = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
    block, warps = launch_settings(n)
    _fwd_kernel[(x2.shape[0],)](x2, r2, s2, y2, w, rstd, n, eps, HAS_RES=residual is not None, BLOCK=block,
                                num_warps=warps)  # fmt: skip
    return y2.view(x.shape), s2.view(x.shape), rstd


def rms_backward(dy: torch.Tensor, ds: torch.Tensor | None, s: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(dx, dw) from the saved normalized input ``s`` and ``rstd``; ``ds`` = gradient of the sum output."""
    n = s.shape[-1]
    s2 = s.reshape(-1, n)
    dy2 = dy.reshape(-1, n).contiguous()
    ds2 = ds.reshape(-1, n).contiguous() if ds is not None else dy2
    m = s2.shape[0]
    dx = torch.empty_like(s2)
    programs = reduction_programs(m, s.device)
    dw_partial = torch.empty((programs, n), dtype=torch.float32, device=s.device)
    block, warps = launch_settings(n)
    _bwd_kernel[(programs,)](dy2, ds2, s2, w, rstd, dx, dw_partial, m, n, triton.cdiv(m, programs),
                             HAS_DS=ds is not None, BLOCK=block, num_warps=warps)  # fmt: skip
    return dx.view(s.shape), dw_partial.sum(0).to(w.dtype)


class _RMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:  # type: ignore[override]
        y, s, rstd = rms_forward(x, None, w, eps)
        ctx.save_for_backward(s, w, rstd)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:  # type: ignore[override]
        s, w, rstd = ctx.saved_tensors
        dx, dw = rms_backward(dy, None, s, w, rstd)
        return dx, dw, None


class _AddRMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, eps: float  # type: ignore[override]
                ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        ctx.set_materialize_grads(False)  # an unused sum output costs no zero tensor and no read
        y, s, rstd = rms_forward(x, r, w, eps)
        ctx.save_for_backward(s, w, rstd)
        return s, y

    @staticmethod
    def backward(ctx, ds: torch.Tensor | None, dy: torch.Tensor | None  # type: ignore[override]
                 ) -> tuple[torch.Tensor | None, ...]:  # fmt: skip
        s, w, rstd = ctx.saved_tensors
        if dy is None:  # only the sum was used: the norm contributes nothing
            return ds, ds, None, None
        dx, dw = rms_backward(dy, ds, s, w, rstd)
        return dx, dx, dw, None


# ------------------------------------------------------------------------------ references (naive)


class RMSNorm(nn.Module):
    """Eager reference: y = x / sqrt(mean(x²) + eps) · w, statistics in fp32."""

    def __init__(self, hidden: int, dtype: torch.dtype, device: torch.device, eps: float = EPS) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden, dtype=dtype, device=device))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()).to(x.dtype)


class AddRMSNorm(RMSNorm):
    """Eager reference: s = x + r; returns (s, RMSNorm(s))."""

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        s = x + r
        return s, super().forward(s)


class TritonRMSNorm(RMSNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNormFn.apply(x, self.weight, self.eps)


class TritonAddRMSNorm(RMSNorm):
    def forward(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return _AddRMSNormFn.apply(x, r, self.weight, self.eps)


def _random_weight(module: RMSNorm, gen: torch.Generator) -> RMSNorm:
    w = module.weight
    with torch.no_grad():
        w.copy_(1 + 0.1 * torch.randn(w.shape, generator=gen).to(w.device, w.dtype))
    return module


class RMSNormCase(ActivationCase):
    name = "rms"
    description = "RMSNorm: one read of x, one write of y"
    triton_module = TritonRMSNorm

    def bytes_per_call(self, shape: Shape, dtype: torch.dtype, direction: str) -> int:
        """M = batch·seq_len rows, N = hidden, e = element size (the weight has the activations' dtype).

        fwd: read x (M·N), w (N); write y (M·N)            → (2·M·N + N)·e
        bwd: read x (M·N), dy (M·N), w (N); write dx (M·N), dw (N) → (3·M·N + 2·N)·e"""
        m, n = shape.rows, shape.hidden
        return (2 * m * n + n if is_fwd(direction) else 3 * m * n + 2 * n) * dtype.itemsize

    def reference(self, hidden: int, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> nn.Module:
        return _random_weight(RMSNorm(hidden, dtype, device), gen)


class AddRMSNormCase(ActivationCase):
    name = "add_rms"
    description = "residual add + RMSNorm fused: reads x and r once, writes the sum and y"
    n_inputs = 2
    triton_module = TritonAddRMSNorm

    def bytes_per_call(self, shape: Shape, dtype: torch.dtype, direction: str) -> int:
        """M = batch·seq_len rows, N = hidden, e = element size.

        fwd: read x, r (2·M·N), w (N); write s = x + r and y (2·M·N) → (4·M·N + N)·e
        bwd: read ds, dy (the two outputs' gradients, 2·M·N), s (M·N: the saved sum replaces x and r), w (N);
             write dx (M·N; dr is the same tensor: d(x + r)/dx = d(x + r)/dr), dw (N) → (4·M·N + 2·N)·e"""
        m, n = shape.rows, shape.hidden
        return (4 * m * n + n if is_fwd(direction) else 4 * m * n + 2 * n) * dtype.itemsize

    def reference(self, hidden: int, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> nn.Module:
        return _random_weight(AddRMSNorm(hidden, dtype, device), gen)


register_case(RMSNormCase())
register_case(AddRMSNormCase())
