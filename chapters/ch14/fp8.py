"""fp8_compile: an FP8 MLP's quantisation passes, eager against ``torch.compile``.

The MLP (Llama-3-8B's width, no gate): x [8192, 4096] -> fc1 (4096 -> 14336) -> GELU -> fc2 (14336 -> 4096), bf16
in and out, both GEMMs on the FP8 tensor cores (``torch._scaled_mm``, e4m3, one scale per tensor, fp32
accumulation). The weights are quantised once, in setup (as at load time); the activations in every call, from
their own max (dynamic scaling: chapters/ch19/training.py ``to_fp8_tensor``, shared with chapter 19's FP8 training).
Eager, each quantisation is a chain of passes over its tensor (abs, amax, the scale, multiply, cast), and GELU
one more over the 235 MB hidden activation; compiled, Inductor fuses GELU with the hidden activation's amax and
the scale with the cast, leaving ~2 passes per activation. Both sides run the same function; the outputs agree
up to where each rounds (``Fp8Mlp.rtol`` says why that is ~1 %).

Smoke: 48 x 64 -> 160 -> 64 (FP8 GEMMs need multiples of 16). On a GPU FP8 needs compute capability 8.9+.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench import context
from chapters.ch14.common import Forward, compile_now, randn
from chapters.ch19.common import FP8, fp8_ready
from chapters.ch19.training import to_fp8_tensor as to_fp8


def fp8_mlp(x: torch.Tensor, w1: torch.Tensor, s1: torch.Tensor, w2: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
    """GELU(x @ w1.T) @ w2.T with both GEMMs in FP8: w1, w2 already e4m3 codes with inverse scales s1, s2."""
    xq, xs = to_fp8(x, FP8)
    h = F.gelu(torch._scaled_mm(xq, w1.t(), scale_a=xs, scale_b=s1, out_dtype=torch.bfloat16))
    hq, hs = to_fp8(h, FP8)
    return torch._scaled_mm(hq, w2.t(), scale_a=hs, scale_b=s2, out_dtype=torch.bfloat16)


class Fp8Mlp(Forward):
    """fp8_compile (module docstring): ``compiled`` or eager. Inputs: x; the quantised weights are the model's."""

    # The same function, rounded differently: eager rounds GELU's output to bf16 before the hidden activation is
    # scaled and cast, Inductor keeps it in fp32 inside the fused kernel. A value within a bf16 step (2^-9) of the
    # midpoint between two e4m3 codes (steps of 2^-4) then lands on the other code: ~3 % of the hidden values,
    # each moved by a step, ~1 % of the output's norm (measured 1.35 % on the CPU at smoke size). A missing GELU or
    # a wrong scale is off by O(1).
    rtol = 3e-2

    def __init__(self, compiled: bool) -> None:
        self.compiles = compiled

    def make(self) -> None:
        ctx = context()
        fp8_ready()
        t, d, f = ctx.size((8192, 4096, 14336), (48, 64, 160))
        ctx.record("shape", f"{t} tokens, {d} -> {f} -> {d}, FP8 GEMMs (per-tensor scales)")
        x = randn(t, d, offset=1)
        w1q, s1 = to_fp8(randn(f, d, offset=2, scale=d**-0.5), FP8)
        w2q, s2 = to_fp8(randn(d, f, offset=3, scale=f**-0.5), FP8)
        self.args = (x, w1q, s1, w2q, s2)
        self.fn = compile_now(fp8_mlp, *self.args) if self.compiles else fp8_mlp
        self.work = {"flops": 2 * 2 * t * d * f, "dtype": "fp8"}

    def inputs(self) -> torch.Tensor:
        return self.args[0]
