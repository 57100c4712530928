"""Attention logits with a stored position bias: the ALiBi bias read from a materialised [H, S, S] tensor.

out[h, i, j] = scores[h, i, j] * scale + bias[h, i, j], with bias = slope_h * (j - i) (ALiBi; T5's
relative bias is likewise materialised per head). The bias is computed once, in setup, and kept
in DRAM as a tensor the size of the scores (16 heads x 1760² fp32 = 198 MB on an H100, 4x L2):
storing it is the design under test, so building it is not timed. Each call then reads scores and
bias and writes out: 12 bytes per element for 3 flops.

Predicted (not measured): bandwidth-bound, 1.4-1.5x slower than recomputing the bias on an H100
(12 against 8 bytes per element; ~0.2 ms per call).

Work (minimum): read scores, write out, 8 B per element (400 MB); 3 flops per element.
"""

import torch
import triton
import triton.language as tl

from chapters.ch09.common import Example, alibi_logits, first_operand

BLOCK = 1024


@triton.jit
def logits_stored_bias(s_ptr, bias_ptr, out_ptr, seq, scale, BLOCK: tl.constexpr):
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    at = tl.program_id(0).to(tl.int64) * seq + j  # program (h * S + i, column block)
    s = tl.load(s_ptr + at, mask=j < seq)
    tl.store(out_ptr + at, s * scale + tl.load(bias_ptr + at, mask=j < seq), mask=j < seq)


def launch(scores: torch.Tensor, scale: float, slopes: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
    heads, seq, _ = scores.shape
    logits_stored_bias[(heads * seq, triton.cdiv(seq, BLOCK))](scores, bias, out, seq, scale, BLOCK=BLOCK)


def get_benchmark() -> Example:
    # The bias is a table derived from constants, not data: the harness changes only the scores.
    return Example(lambda: alibi_logits(stored=True), launch, inputs=first_operand)
