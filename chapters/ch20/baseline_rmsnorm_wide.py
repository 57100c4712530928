"""RMSNorm over rows of 16384 bf16 (Llama-3-405B's hidden size) with what a kernel gets by default.

out = x / sqrt(mean(x²) + eps) * w, one program per row, the whole row in registers (one read of x), and
Triton's default 4 warps: 128 threads for 16384 values, 128 fp32 values per thread held between the sum
of squares and the scaling. Built for sm_90 that is 236 registers per thread, no spills
(tests/chapters/test_ch20_search.py): two programs fit an SM (8 of its 64 warp slots). Each loads its
32 KiB row at once, so bytes in flight are not short; what is short is overlap: a program's load, its
cross-warp reduction and its stores run one after another, and two programs per SM leave the memory
pipe idle whenever both are between loads.

Predicted on an H100 (not measured; the chapter's least certain prediction): ~60-75 % of the copy
bandwidth, ~180-220 µs for 400 MB (200 MB of x, 4x L2, read and written). Clock: the default (CUDA events,
L2 flushed). Work per call (minimum): read x and w, write out, 2 B each; 4 FLOPs per element.
"""

from chapters.ch20.common import WIDE_ROWS, Example, fixed_norm, rows_problem


def get_benchmark() -> Example:
    return Example(rows_problem(WIDE_ROWS), fixed_norm)
