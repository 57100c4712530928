"""Row sums by atomics: every element is added into its row's total with its own atomic.

out[r] = sum of row r of x (64 rows filling 4x L2: 200 MB on an H100). The output is zeroed, then
each program loads 4096 elements of one row and issues one atomic add per element into out[r]
(``tl.atomic_add``, relaxed order: nothing else is ordered by it). Atomics to one address cannot
run in parallel: they queue at the L2 slice that owns it, and all 64 totals share two 128-byte
lines. That is ~50 M serialized read-modify-writes per call, where the loads alone would take
~70 µs. The sum's order is whatever the hardware serializes: run to run the last bits differ.

Predicted (not measured): bound by same-address atomic throughput in L2, ~1-2 per clock for the
whole device: 15-50 ms per call on an H100, 100x or more slower than the tree.

Work (minimum): read x once, write 64 sums, 4MN + 4M bytes (200 MB); MN adds.
"""

import torch
import triton
import triton.language as tl

from chapters.ch08.common import ROW_BLOCK, Example, reduction_grid, wide_rows


@triton.jit
def row_sums_atomic(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + cols, mask=mask)
    tl.atomic_add(out_ptr + row + 0 * cols, x, mask=mask, sem="relaxed")  # one atomic per element


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    out.zero_()
    row_sums_atomic[reduction_grid(x)](x, out, x.shape[1], BLOCK=ROW_BLOCK, num_warps=4)


def get_benchmark() -> Example:
    return Example(wide_rows, launch)
