"""5-point stencil by 2-D tiles: each program a TILE_M x TILE_N tile, neighbours mostly its own.

The same kernel as the baseline (``common.stencil5``); only the tile shape changes, from 1 x 1024
to 32 x 128. Program (I, J) loads its tile and the four copies shifted by one row or column;
within a tile the shifted loads touch the sectors the centre load just brought in (L1 hits), so
only a one-point halo comes from L2: (32 + 2) / 32 rows x (16 + 2) / 16 sectors per 128-column
row, ~1.2x the tile's bytes (~5 B of L2 reads per point) against the row version's ~3x (~12 B).
DRAM traffic is the minimum for both (each row read about once, see the baseline); the blocking
saves L2 bandwidth. Same arithmetic in the same order: outputs equal bit for bit.

Predicted (not measured): 1.0-1.3x faster than the baseline on an H100, near copy bandwidth;
tile 32 x 128 on 8 warps is not tuned.

Traffic (minimum): read 4MN + write 4MN bytes, 8192 x 8192 fp32 -> 512 MiB per call; 6 flops per
point.
"""

from chapters.ch07.common import Example, stencil_grid, stencil_launch


def get_benchmark() -> Example:
    return Example(stencil_grid, stencil_launch(32, 128, num_warps=8))
