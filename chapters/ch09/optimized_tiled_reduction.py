"""Row softmax in one pass: the row is read once into registers and both reductions run on the tile.

Same rows, same program per row, same 16 values per thread; the one idea is to keep the tile on
chip between the reductions: load the row, reduce it to its max, exponentiate, reduce to the sum,
divide, store. 8 bytes per element cross DRAM instead of 16: the intensity doubles (0.31 -> 0.63
FLOP/B), and this bandwidth-bound kernel's time halves. The same exps and sums in the same tree
order as the baseline: outputs equal bit for bit in the interpreter, and should on a GPU
(compared at the default fp32 rtol either way).

Predicted (not measured): ~2x faster than the baseline on an H100, >= 80 % of copy bandwidth
(~0.14 ms per call).

Work (minimum): as the baseline, 400 MB and 5 flops per element per call.
"""

import torch
import triton
import triton.language as tl

from chapters.ch09.common import Example, add, maximum, row_launch, score_rows


@triton.jit
def softmax_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    at = row.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + at, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.reduce(x, 0, maximum))
    tl.store(out_ptr + at, e / tl.reduce(e, 0, add), mask=cols < n_cols)


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    rows, n = x.shape
    block, warps = row_launch(n)
    softmax_rows[(rows,)](x, out, n, BLOCK=block, num_warps=warps)


def get_benchmark() -> Example:
    return Example(score_rows, launch)
