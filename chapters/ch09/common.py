"""What every chapter-9 variant shares: the problems, sized so each pair sits where its idea matters
on the roofline, and their minimum work.

Every ``get_work()`` here declares both bytes and FLOPs, so each variant is a point on the roofline
chart (arithmetic intensity = FLOPs / bytes of the *minimum* traffic, the same on both sides of a
pair); what the slower side really moves is in its docstring. The benchmark shell, the seeded
draws, the combine functions and the bf16 matmul kernel come from chapter 8 (``chapters.ch08.common``).
Memory-bound problems are sized at 4x the device's L2 (``ctx.working_set``) so every call streams
from DRAM; smoke sizes keep the Triton interpreter (CPU) to a few programs per call with lengths
that are not multiples of any block.
"""

from __future__ import annotations

import math

import torch
import triton

from bench import context
from chapters.ch01.common import Inputs, randn
from chapters.ch08.common import Example as Example  # re-exported: the variants import from this chapter
from chapters.ch08.common import add as add
from chapters.ch08.common import first_operand as first_operand
from chapters.ch08.common import matmul as matmul
from chapters.ch08.common import matmul_operands
from chapters.ch08.common import maximum as maximum
from chapters.ch08.common import square_matmul as square_matmul  # tile_intensity: 8192³ bf16

# --- elementwise_chain: the tanh form of GELU ------------------------------------------------------

GELU_C, GELU_K = 0.7978845608028654, 0.044715  # sqrt(2 / pi), the cubic term's coefficient
GELU_FLOPS = 10  # per element: x³ (2), * k, +, * c, tanh (counted as 1), 1 +, 0.5 *, *


def gelu_vector() -> Inputs:
    """elementwise_chain: x filling 4x L2 (200 MB, 50 M fp32 on an H100); 3 * 1024 + 7 smoke.

    Work (minimum): read x, write out (8 B per element); GELU_FLOPS per element.
    """
    n = context().working_set(l2=4, smoke=4 * (3 * 1024 + 7), name="x_bytes") // 4
    x = randn(n)
    return (x,), torch.empty_like(x), {"bytes": 8 * n, "flops": GELU_FLOPS * n}


# --- epilogue_fusion: an FFN up-projection, gelu(x @ W + b) ----------------------------------------


def ffn_up() -> Inputs:
    """epilogue_fusion: 16384 tokens x 2048 features through a 2048 -> 4096 projection, bf16 (275 GFLOP;
    x 64 MiB, W 16 MiB, out 128 MiB); 37 x 45 x 40 smoke.

    Work (minimum): read x, W, b once, write out once; 2MNK flops (the epilogue's ~10 MN are 0.2 % more).
    """
    m, n, k = context().size((16384, 4096, 2048), (37, 45, 40))
    return matmul_operands(m, n, k, bias=True)


# --- tiled_reduction: row softmax ------------------------------------------------------------------

SOFTMAX_FLOPS = 5  # per element: max, subtract, exp, add, divide


def score_rows() -> Inputs:
    """tiled_reduction: rows of 4096 fp32 (attention scores at sequence 4096) filling 4x L2 (200 MB, 12207
    rows on an H100); 5 rows of 100 smoke.

    Work (minimum): read x once, write out once (8 B per element); SOFTMAX_FLOPS per element.
    """
    ctx = context()
    width = ctx.size(4096, 100)
    rows = ctx.working_set(l2=4, smoke=4 * 5 * width, name="x_bytes") // (4 * width)
    x = randn(rows, width, scale=3.0)  # logits spread over a few units: the max matters
    return (x,), torch.empty_like(x), {"bytes": 8 * rows * width, "flops": SOFTMAX_FLOPS * rows * width}


# --- recompute_bias: attention logits with an ALiBi position bias ----------------------------------

HEADS = 16


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes 2^(-8 (h + 1) / H) (Press et al.), fp32 on the run's device."""
    h = torch.arange(1, heads + 1, dtype=torch.float64)
    return torch.exp2(-8.0 * h / heads).float().to(context().device)


def alibi_bias(slopes: torch.Tensor, seq: int) -> torch.Tensor:
    """The bias materialised: bias[h, i, j] = slopes[h] * (j - i), fp32 [H, S, S]."""
    pos = torch.arange(seq, device=slopes.device)
    return slopes[:, None, None] * (pos[None, None, :] - pos[None, :, None]).float()


def alibi_logits(stored: bool) -> Inputs:
    """recompute_bias: scores [16 heads, S, S] fp32 filling 4x L2 (S = 1760 on an H100: 198 MB); 3 x 37 x 37 smoke.

    Operands: (scores, scale, slopes, bias) with the bias tensor materialised when ``stored`` (built here,
    untimed: storing it is the design being compared), else None. Work (minimum): read scores, write out
    (8 B per element); 3 flops per element (scale, bias product, add).
    """
    ctx = context()
    heads = ctx.size(HEADS, 3)
    seq = math.isqrt(ctx.working_set(l2=4, smoke=4 * heads * 37 * 37, name="scores_bytes") // (4 * heads))
    # Full size: rows of a multiple of 16 elements start 64-byte aligned, so both kernels load 16 bytes at a time.
    seq = ctx.size(seq // 16 * 16, seq)
    scores = randn(heads, seq, seq)
    slopes = alibi_slopes(heads)
    bias = alibi_bias(slopes, seq) if stored else None
    scale = 1 / math.sqrt(128)  # 1 / sqrt(head dim)
    work = {"bytes": 8 * scores.numel(), "flops": 3 * scores.numel()}
    return (scores, scale, slopes, bias), torch.empty_like(scores), work


def row_launch(n_cols: int) -> tuple[int, int]:
    """(BLOCK, num_warps) for one program per row holding the whole row: 16 fp32 per thread at most."""
    block = triton.next_power_of_2(n_cols)
    return block, max(1, min(16, block // (32 * 16)))


# --- batched_matvec: one weight matrix, many vectors -----------------------------------------------

BATCH = 64  # batched_matvec: vectors per call


def weight_and_vectors() -> Inputs:
    """batched_matvec: BATCH = 64 bf16 vectors x_b and one bf16 weight W [N, K] filling 4x L2 (10240 x
    10240, 200 MiB on an H100); 5 vectors and a 45 x 40 weight at smoke size.

    Operands (x [B, K], W [N, K]: nn.Linear's layout); output: the B products W @ x_b as the rows of
    out [B, N], bf16. Work (minimum): read W and x once, write out once, 2(NK + BK + BN) bytes; 2BNK
    flops: an intensity just under B FLOP/B (63 at full size).
    """
    ctx = context()
    batch = ctx.size(BATCH, 5)
    side = math.isqrt(ctx.working_set(l2=4, smoke=2 * 45 * 40, name="w_bytes") // 2)
    n, k = ctx.size((side // 128 * 128,) * 2, (45, 40))  # full size: whole 128-wide tiles for cuBLAS
    x = randn(batch, k, offset=0).bfloat16()
    w = randn(n, k, offset=1, scale=1 / math.sqrt(k)).bfloat16()  # keeps the products O(1)
    work = {"bytes": 2 * (n * k + batch * k + batch * n), "flops": 2 * batch * n * k}
    return (x, w), torch.empty(batch, n, device=x.device, dtype=torch.bfloat16), work
