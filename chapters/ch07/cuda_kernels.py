"""Chapter 7's CUDA C++ kernels (``bench.cuda_source``): compiled with NVRTC when a variant sets up on a GPU,
and to a CUBIN for sm_90 by the tests on any host (tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch
import triton

from bench import cuda_source
from chapters.ch07.common import Example, matrix

# Shared memory has 32 banks of 4 bytes; a warp's access takes one pass per distinct address in the busiest
# bank. A warp reading a column of a [32][32] fp32 tile hits one bank 32 times (32 passes); a row length
# of 33 spreads that column over all 32 banks (one pass). PAD is the only difference between the two sides.
TRANSPOSE_TILE = r"""
#define TILE 32
#define ROWS 8  // threads per block: TILE x ROWS; each thread moves TILE / ROWS elements
extern "C" __global__ void __launch_bounds__(TILE * ROWS)
transpose_tile(const float* __restrict__ x, float* __restrict__ out, int m, int n) {
    __shared__ float tile[TILE][TILE + PAD];
    const int col = blockIdx.x * TILE + threadIdx.x;  // column of x this thread reads
    const int row0 = blockIdx.y * TILE;               // first row of x of this block's tile
    for (int r = threadIdx.y; r < TILE; r += ROWS) {  // lanes along a row of x: coalesced reads
        const int row = row0 + r;
        if (row < m && col < n) tile[r][threadIdx.x] = x[(size_t)row * n + col];
    }
    __syncthreads();
    // out is n x m, out[c][r] = x[r][c]: lanes along a row of out (a column of the tile): coalesced writes
    const int ocol = row0 + threadIdx.x;  // column of out = row of x
    for (int r = threadIdx.y; r < TILE; r += ROWS) {
        const int orow = blockIdx.x * TILE + r;  // row of out = column of x
        if (orow < n && ocol < m) out[(size_t)orow * m + ocol] = tile[threadIdx.x][r];
    }
}
"""
TILE_CUDA, ROWS = 32, 8  # the kernel's TILE and ROWS (tests/chapters/test_cuda_sources.py holds them equal)
# -DPAD=0 (baseline) and -DPAD=1 (optimized): the same source, the only difference the tile's row length
TRANSPOSE_SOURCES = {
    pad: cuda_source(TRANSPOSE_TILE, name=f"transpose_tile_pad{pad}.cu", options=(f"-DPAD={pad}",)) for pad in (0, 1)
}


class TileTranspose(Example):
    """bank_conflicts: ``transpose_tile`` compiled with ``-DPAD=<pad>``, on ``matrix()``'s operands."""

    def __init__(self, pad: int) -> None:
        super().__init__(matrix, self._launch)
        self.source = TRANSPOSE_SOURCES[pad]

    def setup(self) -> None:
        self.kernel = self.source.kernel("transpose_tile")  # skips on a host without a GPU, before allocating
        super().setup()

    def _launch(self, x: torch.Tensor, out: torch.Tensor) -> None:
        m, n = x.shape
        grid = (triton.cdiv(n, TILE_CUDA), triton.cdiv(m, TILE_CUDA))
        self.kernel(grid, (TILE_CUDA, ROWS), x, out, np.int32(m), np.int32(n))
