"""Chapter 9's CUDA C++ kernels (``bench.cuda_source``): an fp32 GEMM written by hand, naive, with shared-memory
tiles, and with shared-memory and register tiles. Compiled with NVRTC when a variant sets up on a GPU, and to a
CUBIN for sm_90 by the tests on any host (tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch

from bench import context, cuda_source
from chapters.ch01.common import CudaExample, Inputs, randn

TS = 32  # gemm_shared's tile: 32 x 32 threads, one element of C each
BM, BN, BK = 128, 128, 8  # the tiled kernel's block tile (C rows, C columns) and K step; 256 threads of 8 x 8

GEMM = cuda_source(
    r"""
// C (M x N) = A (M x K) @ B (K x N), fp32, row-major.

// One thread per element of C, lanes along a row of C: each thread reads a row of A and a column of B,
// 2K loads for 2K flops; neighbouring lanes share the A row (a broadcast) and read B coalesced, and
// L1/L2 catch some reuse, but every operand still crosses from cache to registers once per FMA.
extern "C" __global__ void gemm_naive(const float* __restrict__ A, const float* __restrict__ B,
                                      float* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}

// One thread per element of C, 32 x 32 threads per block, A's and B's 32 x 32 tiles staged in shared memory per
// K step of 32: each global element is loaded once per block instead of once per FMA, but every FMA still
// reads its two operands from shared memory (A's value is a broadcast: one row per warp; B's row conflict-free),
// so shared-memory bandwidth, not the FMA pipes, sets the pace. Any M, N, K (edges read as zeros).
#define TS 32
extern "C" __global__ void __launch_bounds__(TS * TS)
gemm_shared(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS];
    const int tx = threadIdx.x % TS, ty = threadIdx.x / TS;
    const int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[ty][tx] = row < M && k0 + tx < K ? A[(size_t)row * K + k0 + tx] : 0.f;
        Bs[ty][tx] = k0 + ty < K && col < N ? B[(size_t)(k0 + ty) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < TS; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // the tiles are overwritten by the next step
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

// A 128 x 128 tile of C per block of 256 threads, each thread an 8 x 8 sub-tile held in registers.
// Per K step of 8 the block stages A's 128 x 8 and B's 8 x 128 in shared memory (1024 + 1024 floats,
// 4 + 4 per thread), then each thread reads 8 + 8 values from shared memory per k (four 16-byte loads)
// and does 64 FMAs with them: 16 FMAs per shared load instruction instead of one global load per FMA.
// Thread (tx, ty) owns rows ty*8 .. ty*8+7 and columns tx*4 .. tx*4+3 and 64+tx*4 .. 64+tx*4+3: a warp's
// 16-byte reads of B then cover 256 contiguous bytes (2 shared-memory passes, no bank conflict).
// Needs M, N multiples of 128 and K of 8 (the launcher checks).
#define BM 128
#define BN 128
#define BK 8
extern "C" __global__ void __launch_bounds__(256)
gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    // A's tile transposed, As[k][m]; rows of 132 floats: the 8 lanes storing one row of A's tile land in
    // 8 different banks, and each row stays 16-byte aligned (528 bytes)
    __shared__ __align__(16) float As[BK][BM + 4];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[8][8];
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += 256) {  // A: 128 rows of 8; 8 lanes read one row's 32 bytes
            const int r = e / BK, c = e % BK;
            As[c][r] = A[(size_t)(row0 + r) * K + k0 + c];
        }
        for (int e = threadIdx.x; e < BK * BN; e += 256) {  // B: 8 rows of 128; lanes along a row, coalesced
            const int r = e / BN, c = e % BN;
            Bs[r][c] = B[(size_t)(k0 + r) * N + col0 + c];
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[k][ty * 8]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[k][ty * 8 + 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            for (int i = 0; i < 8; ++i)
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // the tiles are overwritten by the next step
    }
    for (int i = 0; i < 8; ++i) {
        float* c_row = C + (size_t)(row0 + ty * 8 + i) * N + col0;
        *reinterpret_cast<float4*>(c_row + tx * 4) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *reinterpret_cast<float4*>(c_row + 64 + tx * 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}
""",
    name="gemm.cu",
)


def square_operands() -> Inputs:
    """cuda_gemm: A (M x K) @ B (K x N) in fp32, 4096^3 (64 MiB per operand); smoke 256 x 384 x 72 (the tiled
    kernel's multiples: M, N of 128, K of 8).

    Minimum bytes: each operand read once and C written once, 4(MK + KN + MN); 2MNK flops."""
    m, n, k = context().size((4096, 4096, 4096), (256, 384, 72))
    a, b = randn(m, k, offset=0), randn(k, n, offset=1)
    work = {"bytes": 4 * (m * k + k * n + m * n), "flops": 2 * m * n * k}
    return (a, b), torch.empty(m, n, device=a.device), work


def naive_launch(kernel, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    (m, k), n = a.shape, b.shape[1]
    kernel(((n + 31) // 32, (m + 7) // 8), (32, 8), a, b, out, np.int32(m), np.int32(n), np.int32(k))


def tiled_launch(kernel, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    (m, k), n = a.shape, b.shape[1]
    if m % BM or n % BN or k % BK:
        raise ValueError(f"gemm_tiled: M={m}, N={n}, K={k}; it needs M and N multiples of {BM}, K of {BK}")
    kernel((n // BN, m // BM), 256, a, b, out, np.int32(m), np.int32(n), np.int32(k))


def shared_launch(kernel, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    (m, k), n = a.shape, b.shape[1]
    kernel(((n + TS - 1) // TS, (m + TS - 1) // TS), TS * TS, a, b, out, np.int32(m), np.int32(n), np.int32(k))


LAUNCHES = {"gemm_naive": naive_launch, "gemm_shared": shared_launch, "gemm_tiled": tiled_launch}


def gemm(kernel: str) -> CudaExample:
    return CudaExample(GEMM, kernel, square_operands, LAUNCHES[kernel])
