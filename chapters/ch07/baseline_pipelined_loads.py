"""Row sums without software pipelining: each program walks its row one block at a time.

Program r sums row r of x (256 rows of 256 Ki fp32) in steps of BLOCK = 1024: load a block
(4 KiB), add it into a BLOCK-wide accumulator, next. The add waits for the load, and the next
load is issued only after the add, so each program has one 4 KiB load in flight and spends most
of every step waiting out DRAM latency. With 256 programs (about two per SM on an H100) nothing
else hides that wait: ~8 KiB in flight per SM, where keeping HBM busy takes roughly
latency x bandwidth / SMs, ~20 KiB per SM.

Predicted (not measured): 2-3x slower than the pipelined version on an H100, about a third of
copy bandwidth. With thousands of rows, other programs' loads would hide the latency and the
two versions would converge.
Measured on an H100 (2026-11-21): 116.4 µs, 1.21x slower than the pipelined version (run 0b39ff5f):
the prediction overstated the gap.

Traffic (minimum): read 4MN + write 4M bytes, 256 x 256 Ki fp32 -> 256 MiB per call.
"""

from chapters.ch07.common import Example, long_rows, row_sums_launch


def get_benchmark() -> Example:
    return Example(long_rows, row_sums_launch(num_stages=1))
