"""Fake "optimizations" of chapter 20's matmul, as a search or an AI agent might return them, and the honest
ones beside them. Every file here solves chapter 20's ``matmul_search`` problem (C = A @ B, bf16 8192³;
square at smoke size too, 45³); the baseline is its hand-default kernel. Each fake is fast for a reason that
is not a better kernel, and perflab must end it not ok or not verified; each honest one must stay ok and
verified. ``tests/chapters/test_ch20_fakes.py`` runs them all and checks each verdict.

Run them: ``perflab run --chapters-dir chapters/ch20/fakes --targets ch91``. They are numbered ch91, not
ch20, so that their runs are never taken for chapter 20's pairs (``perflab readme`` fills a chapter's table
from the latest suite tagged with it).
"""

from __future__ import annotations

import torch

from bench import context
from chapters.ch20.common import MATMUL_DEFAULT, Example, fixed_matmul, matmul_operands

FP8 = torch.float8_e4m3fn


def square() -> tuple:
    """Chapter 20's matmul_search problem, 8192³ bf16; 45³ at smoke size."""
    return matmul_operands(*context().size((8192, 8192, 8192), (45, 45, 45)))


class Matmul(Example):
    """The baseline: chapter 20's hand-default kernel (64 x 64 x 32 tiles, 4 warps, 3 stages)."""

    def __init__(self) -> None:
        super().__init__(square, fixed_matmul(MATMUL_DEFAULT))

    def honest(self) -> None:
        """One honest call: the hand-default kernel into ``out``."""
        self.launch(self.operands, self.out)


def fp8_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out = A @ B on FP8 tensor cores, both operands quantised per call with one scale each (torch
    operations; B transposed to the column-major layout ``torch._scaled_mm`` needs)."""
    codes, scales = [], []
    for t in (a, b.t()):
        scale = t.abs().amax().float().clamp(min=1e-12) / 448.0
        codes.append((t.float() / scale).to(FP8))
        scales.append(scale)
    qa, qb = codes[0], codes[1].contiguous()  # [N, K] row-major
    torch._scaled_mm(qa, qb.t(), scale_a=scales[0], scale_b=scales[1], out_dtype=torch.bfloat16, out=out)


def fp8_ready() -> None:
    """FP8 needs compute capability 8.9+ on a GPU; a CPU runs torch._scaled_mm in software."""
    ctx = context()
    if ctx.is_cuda:
        ctx.require(capability=(8, 9))
