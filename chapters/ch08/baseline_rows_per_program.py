"""Row sums of a tall, narrow matrix with one program per row: 256 bytes per program, 800 Ki programs.

out[r] = sum of row r of x, x of 64 fp32 columns filling 4x L2 (200 MiB on an H100: 800 Ki rows of
256 B). Each program is one warp (the launch's rule, one warp per 1024 elements of the tile, gives a
64-wide row one): it loads its row, 8 bytes per thread, reduces it by shuffles and stores one float.
An SM holds at most 32 programs at once (Hopper's resident-block limit), so it has at most 32 x 256 B
= 8 KiB of loads in flight, where keeping DRAM busy takes ~23 KB per SM (3 TB/s x ~1 µs of loaded
latency over 132 SMs). And its one load is in flight for only part of a program's short life: the
rest is dispatch, address arithmetic, the shuffles and the store, for 6 K programs per SM per call.

Predicted (not measured): latency-bound at ~25-35 % of the H100's copy bandwidth, ~0.2-0.3 ms per
call, 2.5-4x slower than the optimized version.

Work (minimum): read x once, write the row sums, 4MN + 4M bytes (~210 MB); MN adds.
"""

from chapters.ch08.common import Example, narrow_rows, row_sums_launch


def get_benchmark() -> Example:
    return Example(narrow_rows, row_sums_launch(rows_per_program=1))
