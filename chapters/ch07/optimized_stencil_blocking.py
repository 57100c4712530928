"""5-point stencil by 16 x 128 blocks in column-block order: each row read from DRAM once.

The same kernel as the baseline (``common.stencil5``); the tile becomes 16 x 128 (all 16 rows of a
128-column block) and programs walk along the columns. A block loads its rows and the copies
shifted by one row or column; the north/south neighbours are inside the block (L1 hits), the
west/east halo columns belong to the blocks launched just before and after it (L2 hits). The
reuse distance drops from a row (64 MiB, more than L2) to a block (8 KiB): DRAM sees each element
read once and written once, the minimum. Same arithmetic in the same order: outputs equal bit for
bit.

Predicted (not measured): ~1.6-1.9x faster than the row-major baseline on an H100, near copy
bandwidth; 16 x 128 on 8 warps is not tuned.
Measured on an H100 (2026-11-21): 768 µs, 2797 GB/s (93 % of copy bandwidth), 1.73x faster (run 0b39ff5f).

Traffic (minimum): read 4MN + write 4MN bytes, 16 x 16 Mi fp32 -> 2 GiB per call; 6 flops per point.
"""

from chapters.ch07.common import Example, stencil_grid, stencil_launch


def get_benchmark() -> Example:
    return Example(stencil_grid, stencil_launch(16, 128, num_warps=8, cols_fast=True))
