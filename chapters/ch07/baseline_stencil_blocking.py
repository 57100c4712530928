"""5-point stencil in row-major order: the neighbour rows are re-read from DRAM.

out[i, j] = C_SELF * x[i, j] + C_NEIGHBOUR * (x[i-1, j] + x[i+1, j] + x[i, j-1] + x[i, j+1]),
zero outside the grid (``common.stencil5``, shared with the optimized version; only the tile
shape and the program order differ). Programs are 1 x 1024 row segments launched in row-major
order: all of row i, then all of row i+1. Each segment loads rows i-1, i and i+1 at its columns.
A row is 64 MiB (16 Mi fp32) and L2 holds 50 MB, so when row i+1 becomes the centre, what row i
brought in as its "south" neighbour has long been evicted, and by the time row i+2 needs it as
"north" it is gone again: every row comes from DRAM about three times (the two edge rows twice).

Traffic: reads ~3 x 4MN (2.75 x at 16 rows) + writes 4MN, against the minimum 4MN + 4MN; the
declared work is the minimum, so its GB/s shows the waste.

Predicted (not measured): ~1.6-1.9x slower than the blocked version on an H100 (3.75 vs 2 units of
DRAM traffic), both near copy bandwidth in the bytes they really move.
Measured on an H100 (2026-11-21): 1329 µs, 1.73x slower than the blocked version (run 0b39ff5f).

Traffic (minimum): read 4MN + write 4MN bytes, 16 x 16 Mi fp32 -> 2 GiB per call; 6 flops per point.
"""

from chapters.ch07.common import BLOCK, Example, stencil_grid, stencil_launch


def get_benchmark() -> Example:
    return Example(stencil_grid, stencil_launch(1, BLOCK, num_warps=4, cols_fast=True))
