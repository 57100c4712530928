"""RMSNorm over rows of 128 (one attention head: QK-norm) with the same default: one row per program.

The same kernel and default as ``rmsnorm_wide`` (one row per program, the row's power of two per step,
4 warps), on 781,250 rows of 128 bf16 (200 MB, 4x L2): each program is 128 threads moving 256 bytes,
one value per thread, then a cross-warp reduction through shared memory and a barrier for 128 values.
Millions of such programs are the block scheduler's queue, not the memory's.

Predicted on an H100 (not measured): like chapter 7's one-element-per-thread copy (1.76x slower than 8 per
thread, measured there) or worse with the reduction's barrier: ~35-55 % of the copy bandwidth, ~250-400
µs. Clock: the default. Work per call (minimum): read x and w, write out, 2 B each; 4 FLOPs per element.
"""

from chapters.ch20.common import HEAD_ROWS, Example, fixed_norm, rows_problem


def get_benchmark() -> Example:
    return Example(rows_problem(HEAD_ROWS), fixed_norm)
