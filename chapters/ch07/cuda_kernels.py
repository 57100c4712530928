"""Chapter 7's CUDA C++ kernels (``bench.cuda_source``): compiled with NVRTC when a variant sets up on a GPU,
and to a CUBIN for sm_90 by the tests on any host (tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch
import triton

from bench import context, cuda_source
from chapters.ch07.common import A, B, Example, Inputs, generator, matrix

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


# --- vector_loads: fp16 elements moved 2 bytes or 16 bytes per thread access ------------------------------------

THREADS, PER_VECTOR = 256, 8  # threads per block; fp16 elements per 16-byte vector

AFFINE_HALF = cuda_source(
    r"""
#define THREADS 256
#define PER_VECTOR 8  // fp16 elements in 16 bytes
// fp16 <-> fp32 by one cvt each (NVRTC has no cuda_fp16.h here): a half is its 16 bits in an unsigned short
__device__ __forceinline__ float to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short to_half(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ unsigned short affine(unsigned short h, float a, float b) {
    return to_half(to_float(h) * a + b);
}

// out = x * a + b on fp16 (fp32 math), one element per thread: each warp access moves 64 bytes (2-byte lanes),
// one load in flight per thread.
extern "C" __global__ void __launch_bounds__(THREADS)
affine_half(const unsigned short* __restrict__ x, unsigned short* __restrict__ out, float a, float b, long long n) {
    const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (i < n) out[i] = affine(x[i], a, b);
}

// The same, 8 elements per thread through one 16-byte load and one 16-byte store (ld/st.global.v4.u32): each
// warp access moves 512 bytes, 8x the bytes in flight per thread; a ragged tail (n % 8) goes element by element.
__device__ __forceinline__ unsigned affine_pair(unsigned w, float a, float b) {
    return affine(w & 0xffffu, a, b) | ((unsigned)affine(w >> 16, a, b) << 16);
}
extern "C" __global__ void __launch_bounds__(THREADS)
affine_half8(const unsigned short* __restrict__ x, unsigned short* __restrict__ out, float a, float b, long long n) {
    const long long i = ((long long)blockIdx.x * THREADS + threadIdx.x) * PER_VECTOR;
    if (i + PER_VECTOR <= n) {  // x and out are 16-byte aligned (torch allocations), i a multiple of 8
        const uint4 v = *reinterpret_cast<const uint4*>(x + i);
        *reinterpret_cast<uint4*>(out + i) =
            make_uint4(affine_pair(v.x, a, b), affine_pair(v.y, a, b), affine_pair(v.z, a, b), affine_pair(v.w, a, b));
    } else {
        for (long long j = i; j < n; ++j) out[j] = affine(x[j], a, b);
    }
}
""",
    name="affine_half.cu",
)


def halves() -> Inputs:
    """vector_loads: 256 Mi fp16 (512 MiB, over 8x an H200's L2), a length no multiple of 8 at both sizes.

    Minimum bytes: x read once, out written once (4 bytes an element); 2 flops an element."""
    n = context().size(256 * 2**20 + 5, 3 * THREADS * PER_VECTOR + 5)
    x = torch.randn(n, generator=generator(), device=context().device).half()
    return x, torch.empty_like(x), {"bytes": 4 * n, "flops": 2 * n}


class HalfAffine(Example):
    """vector_loads: out = x * A + B in fp16 by ``affine_half`` (``per_thread=1``) or ``affine_half8`` (8)."""

    def __init__(self, per_thread: int) -> None:
        super().__init__(halves, self._launch)
        self.per_thread = per_thread
        self.name = "affine_half8" if per_thread == PER_VECTOR else "affine_half"

    def setup(self) -> None:
        self.kernel = AFFINE_HALF.kernel(self.name)  # skips on a host without a GPU, before allocating
        super().setup()

    def _launch(self, x: torch.Tensor, out: torch.Tensor) -> None:
        per_block = THREADS * self.per_thread
        grid = (x.numel() + per_block - 1) // per_block
        self.kernel(grid, THREADS, x, out, np.float32(A), np.float32(B), np.int64(x.numel()))
