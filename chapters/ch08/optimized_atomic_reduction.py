"""Row sums by a tree: each program reduces its block on chip, a second pass adds the partial sums.

Level 1: each program loads 4096 elements of a row and reduces them in registers and warp
shuffles (``tl.reduce``: a binary tree of depth 12) to one partial sum, stored in a
[rows, blocks] buffer: 191 per row on an H100, 48 KiB for all of them. Level 2: one program per
row adds its row's partials. No atomics, and the order of every addition is fixed: the result is
the same on every run, and its rounding error grows with log2(N) instead of the atomic chain's
sqrt(N). The partial buffer's round trip adds ~0.02 % to the bytes.

The baseline's sequential atomic order loses precision (fp32 accumulation of 781 Ki terms: relative
error ~1e-5 to 1e-4 of the sum), so this pair's outputs are compared at rtol 1e-3 (``get_config``);
tests/chapters/test_ch08_kernels.py checks the tree against a float64 reference at 1e-6.

Predicted (not measured): bandwidth-bound, >= 80 % of the H100's copy bandwidth (~70-80 µs per
call), 100x or more faster than the baseline.

Work (minimum): as the baseline, 200 MB and MN adds per call.
"""

import torch
import triton
import triton.language as tl

from bench import BenchmarkConfig
from chapters.ch08.common import ROW_BLOCK, Example, add, reduction_grid, wide_rows


@triton.jit
def row_partials(x_ptr, part_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(part_ptr + row * tl.num_programs(1) + tl.program_id(1), tl.reduce(x, 0, add))


@triton.jit
def sum_partials(part_ptr, out_ptr, n_parts, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK], 0.0, tl.float32)
    for start in range(0, n_parts, BLOCK):
        i = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + row * n_parts + i, mask=i < n_parts, other=0.0)
    tl.store(out_ptr + row, tl.reduce(acc, 0, add))


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    grid = reduction_grid(x)
    partials = torch.empty(grid, device=x.device)  # from the caching allocator: no device allocation per call
    row_partials[grid](x, partials, x.shape[1], BLOCK=ROW_BLOCK, num_warps=4)
    sum_partials[(grid[0],)](partials, out, grid[1], BLOCK=256, num_warps=4)


def get_benchmark() -> Example:
    # The baseline's atomic order is the imprecise one (see the docstring): compare at 1e-3.
    return Example(wide_rows, launch, BenchmarkConfig(rtol=1e-3))
