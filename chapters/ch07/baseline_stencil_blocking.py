"""5-point stencil by row segments: each program a 1 x BLOCK tile, one segment of one row.

out[i, j] = C_SELF * x[i, j] + C_NEIGHBOUR * (x[i-1, j] + x[i+1, j] + x[i, j-1] + x[i, j+1]),
zero outside the grid (``common.stencil5``, shared with the optimized version; only the tile
shape differs). Program (i, c) loads its segment of row i three times (shifted by -1, 0,
+1: the same sectors, L1 hits) and the same segment of rows i-1 and i+1, which belong to other
programs on other SMs: every row is requested from L2 three times, ~12 B of L2 reads per point.
DRAM sees each row about once: the programs for neighbouring rows run at the same time and a
few 32 KiB rows sit in L2 (50 MB) easily, so at this size the re-reads cost L2 bandwidth, not
DRAM bytes.

Predicted (not measured): 1.0-1.3x slower than the tiled version on an H100; both near copy
bandwidth as long as L2 serves the 3x re-reads. The effect grows with the stencil's radius.

Traffic (minimum): read 4MN + write 4MN bytes, 8192 x 8192 fp32 -> 512 MiB per call; 6 flops per
point.
"""

from chapters.ch07.common import BLOCK, Example, stencil_grid, stencil_launch


def get_benchmark() -> Example:
    return Example(stencil_grid, stencil_launch(1, BLOCK, num_warps=4))
