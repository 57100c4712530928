"""RMSNorm over rows of 16384 bf16 (Llama-3-405B's hidden size) with what a kernel gets by default.

out = x / sqrt(mean(x²) + eps) * w, one program per row, the whole row in registers (one read of x), and
Triton's default 4 warps: 128 threads for 16384 values, 128 fp32 values per thread held between the sum
of squares and the scaling. Few warps per SM can be resident at that register count, so few loads are in
flight: the row's bytes arrive at the latency's pace, not the bandwidth's.

Predicted on an H100 (not measured): ~55-70 % of the copy bandwidth, ~135-170 µs for 200 MB of x (4x L2)
read and written. Clock: the default (CUDA events, L2 flushed). Work per call (minimum): read x and w,
write out, 2 B each; 4 FLOPs per element.
"""

from chapters.ch20.common import WIDE_ROWS, Example, fixed_norm, rows_problem


def get_benchmark() -> Example:
    return Example(rows_problem(WIDE_ROWS), fixed_norm)
