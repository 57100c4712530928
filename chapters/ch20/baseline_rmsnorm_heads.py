"""RMSNorm over rows of 128 (one attention head: QK-norm) with the same default: one row per program.

The same kernel and default as ``rmsnorm_wide`` (one row per program, the row's power of two per step,
4 warps), on 781,250 rows of 128 bf16 (200 MB, 4x L2): each program is 128 threads moving 256 bytes in
and 256 out, one value per thread, then a cross-warp reduction through shared memory for 128 values.
An SM holds at most 16 such programs (64 warp slots): ~4 KiB of loads in flight per SM, a fifth of what
keeping HBM busy takes (~3 TB/s x ~1 µs / 132 SMs ~ 23 KiB).

Predicted on an H100 (not measured): latency-bound at ~25-45 % of the copy bandwidth, ~300-550 µs for
400 MB read and written. Clock: the default. Work per call (minimum): read x and w, write out, 2 B each;
4 FLOPs per element.
"""

from chapters.ch20.common import HEAD_ROWS, Example, fixed_norm, rows_problem


def get_benchmark() -> Example:
    return Example(rows_problem(HEAD_ROWS), fixed_norm)
