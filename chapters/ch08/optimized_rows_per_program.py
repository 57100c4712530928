"""Row sums of a tall, narrow matrix with 64 rows per program: 16 KiB per program, 12.8 K programs.

Same kernel, same 2-D tile code; the one change is BLOCK_M = 64 rows per program instead of 1, so a
program moves 16 KiB (4 warps by the same launch rule, 32 fp32 per thread in eight 16-byte loads,
all issued before the first returns). At 16 resident programs per SM (Hopper's 64 warps) an SM has up
to 256 KiB of loads in flight, ten times what DRAM needs; a program's dispatch, address arithmetic
and exit are paid once per 64 rows, and the grid shrinks 64-fold. This chapter's atomic_reduction
tree runs programs of the same size and warps.

Each row is reduced along its 64 columns only: in the interpreter the additions are the baseline's, in
the same order, and the sums are equal bit for bit. Compiled, a 64-wide row is laid out 2 columns x
32 lanes in the baseline's one-row tile and 4 columns x 16 lanes here, so the trees differ and the
sums agree to fp32 rounding (~1e-7 relative): the default fp32 rtol (1e-5) holds them.

Predicted (not measured): bandwidth-bound, >= 80 % of the H100's copy bandwidth (~70-85 µs per
call), 2.5-4x faster than the baseline.

Work (minimum): as the baseline, ~210 MB and MN adds per call.
"""

from chapters.ch08.common import ROWS_PER_PROGRAM, Example, narrow_rows, row_sums_launch


def get_benchmark() -> Example:
    return Example(narrow_rows, row_sums_launch(rows_per_program=ROWS_PER_PROGRAM))
