"""Attention logits with the ALiBi bias recomputed in the kernel from (head, row, column).

The bias slope_h * (j - i) costs one integer subtract, a conversion and a multiply per element,
against 4 bytes of DRAM traffic to read it: recomputing trades 2 flops for 4 bytes. Each program
(one row i of head h, a block of columns) loads its head's slope once and computes its bias
values in registers; the [H, S, S] tensor is never built or read. 8 bytes per element cross DRAM
instead of 12, and the kernel, still bandwidth-bound, gets faster by that ratio. The bias values
are the ones setup stores for the baseline (the same fp32 products); the add may fuse differently
(an FMA), so outputs agree to fp32 rounding.

Predicted (not measured): 1.4-1.5x faster than the baseline on an H100, >= 80 % of copy bandwidth
(~0.14 ms per call).

Work (minimum): as the baseline, 400 MB and 3 flops per element per call.
"""

import torch
import triton
import triton.language as tl

from chapters.ch09.common import Example, alibi_logits, first_operand

BLOCK = 1024


@triton.jit
def logits_alibi(s_ptr, slopes_ptr, out_ptr, seq, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)  # h * S + i
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    at = row.to(tl.int64) * seq + j
    bias = tl.load(slopes_ptr + row // seq) * (j - row % seq).to(tl.float32)
    tl.store(out_ptr + at, tl.load(s_ptr + at, mask=j < seq) * scale + bias, mask=j < seq)


def launch(scores: torch.Tensor, scale: float, slopes: torch.Tensor, bias: None, out: torch.Tensor) -> None:
    heads, seq, _ = scores.shape
    logits_alibi[(heads * seq, triton.cdiv(seq, BLOCK))](scores, slopes, out, seq, scale, BLOCK=BLOCK)


def get_benchmark() -> Example:
    return Example(lambda: alibi_logits(stored=False), launch, inputs=first_operand)  # slopes: constants
