"""Row softmax as three passes, one reduction each: every pass reads the rows from DRAM again.

softmax over rows of 4096 fp32 (attention scores at sequence 4096) filling 4x L2 (200 MB, 12207
rows on an H100). Pass 1 finds each row's max, pass 2 sums exp(x - max), pass 3 writes
exp(x - max) / sum: three kernels, each one program per row holding the row in registers, but
each starting from DRAM because the whole matrix (4x L2) has left the cache by the time the next
pass begins. Bytes per element: 3 reads + 1 write = 16, for 5 flops: 0.31 FLOP/B.

Predicted (not measured): bandwidth-bound, ~2x slower than the one-pass version on an H100
(16 against 8 bytes per element; ~0.27 ms per call).

Work (minimum): read x once, write out once, 8 B per element (400 MB); 5 flops per element:
intensity 0.63 FLOP/B.
"""

import torch
import triton
import triton.language as tl

from chapters.ch09.common import Example, add, maximum, row_launch, score_rows


@triton.jit
def row_max(x_ptr, max_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(max_ptr + row, tl.reduce(x, 0, maximum))


@triton.jit
def row_sum_exp(x_ptr, max_ptr, sum_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(sum_ptr + row, tl.reduce(tl.exp(x - tl.load(max_ptr + row)), 0, add))


@triton.jit
def normalize(x_ptr, max_ptr, sum_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    at = row.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + at, mask=cols < n_cols)
    tl.store(out_ptr + at, tl.exp(x - tl.load(max_ptr + row)) / tl.load(sum_ptr + row), mask=cols < n_cols)


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    rows, n = x.shape
    block, warps = row_launch(n)
    stats = torch.empty(2, rows, device=x.device)  # per-row max and sum (caching allocator: no device malloc)
    row_max[(rows,)](x, stats[0], n, BLOCK=block, num_warps=warps)
    row_sum_exp[(rows,)](x, stats[0], stats[1], n, BLOCK=block, num_warps=warps)
    normalize[(rows,)](x, stats[0], stats[1], out, n, BLOCK=block, num_warps=warps)


def get_benchmark() -> Example:
    return Example(score_rows, launch)
