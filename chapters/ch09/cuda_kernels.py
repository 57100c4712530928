"""Chapter 9's CUDA C++ kernels (``bench.cuda_source``): an fp32 GEMM written by hand, naive, with shared-memory
tiles, and with shared-memory and register tiles. Compiled with NVRTC when a variant sets up on a GPU, and to a
CUBIN for sm_90 by the tests on any host (tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch

from bench import BenchmarkConfig, context, cuda_source
from chapters.ch01.common import CudaExample, Inputs, randn

MMA_BK = 32  # gemm_mma_bf16's K step (two m16n8k16 steps)
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
// Needs M, N multiples of 128 and K of 8 (the launcher checks). The body is a template on the operands' type:
// fp32 (gemm_tiled) or bf16 widened to fp32 as it is staged (gemm_tiled_bf16, tensor_cores' baseline).
#define BM 128
#define BN 128
#define BK 8
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(unsigned short x) { return __uint_as_float((unsigned)x << 16); }  // bf16

template <typename T>
__device__ __forceinline__ void tiled(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C, int M,
                                      int N, int K) {
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
            As[c][r] = widen(A[(size_t)(row0 + r) * K + k0 + c]);
        }
        for (int e = threadIdx.x; e < BK * BN; e += 256) {  // B: 8 rows of 128; lanes along a row, coalesced
            const int r = e / BN, c = e % BN;
            Bs[r][c] = widen(B[(size_t)(k0 + r) * N + col0 + c]);
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

extern "C" __global__ void __launch_bounds__(256)
gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    tiled(A, B, C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(256)
gemm_tiled_bf16(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, float* __restrict__ C,
                int M, int N, int K) {
    tiled(A, B, C, M, N, K);
}

// The same 128 x 128 block tiles from bf16 operands, multiplied by the tensor cores: mma.sync m16n8k16 (bf16 in,
// fp32 accumulate). 8 warps as 2 x 4, each warp a 64 x 32 tile of C: 4 x 4 fragments of 16 x 8, 64 fp32
// accumulators per thread, as many as gemm_tiled's. Per K step of 32 the block stages A's 128 x 32 (row-major) and
// B's 32 x 128 transposed (Bt[n][k], so a lane's two k-consecutive values of B are one 32-bit word), rows padded by
// 8 bf16 (16 bytes) against bank conflicts. Fragment layout (PTX ISA, m16n8k16): lane = 4 g + t; A: rows g, g + 8,
// columns 2t, 2t + 1 (+ 8); B: column g, rows 2t, 2t + 1 (+ 8); C: rows g, g + 8, columns 2t, 2t + 1.
// Needs M, N multiples of 128 and K of 32 (the launcher checks).
#define MMA_BK 32
#define PAD 8
__device__ __forceinline__ unsigned pair(const unsigned short* p) { return *reinterpret_cast<const unsigned*>(p); }

extern "C" __global__ void __launch_bounds__(256)
gemm_mma_bf16(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, float* __restrict__ C,
              int M, int N, int K) {
    __shared__ __align__(16) unsigned short As[BM][MMA_BK + PAD];
    __shared__ __align__(16) unsigned short Bt[BN][MMA_BK + PAD];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // this warp's tile within the block's
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
    for (int k0 = 0; k0 < K; k0 += MMA_BK) {
        for (int e = threadIdx.x; e < BM * MMA_BK / 8; e += 256) {  // A: 128 rows of 4 16-byte chunks
            const int r = e / 4, c = (e % 4) * 8;
            *reinterpret_cast<uint4*>(&As[r][c]) = *reinterpret_cast<const uint4*>(A + (size_t)(row0 + r) * K + k0 + c);
        }
        // B: 32 rows of 16 chunks, transposed into Bt. The 32 lanes of a warp take the 32 rows of one chunk column:
        // their 2-byte stores Bt[c + q][lane] then fill 16 consecutive words (no bank conflict), where lanes along
        // a row would all hit one bank.
        for (int e = threadIdx.x; e < MMA_BK * BN / 8; e += 256) {
            const int r = e % MMA_BK, c = (e / MMA_BK) * 8;
            const uint4 v = *reinterpret_cast<const uint4*>(B + (size_t)(k0 + r) * N + col0 + c);
            const unsigned words[4] = {v.x, v.y, v.z, v.w};
            for (int q = 0; q < 4; ++q) {
                Bt[c + 2 * q][r] = (unsigned short)(words[q] & 0xffffu);
                Bt[c + 2 * q + 1][r] = (unsigned short)(words[q] >> 16);
            }
        }
        __syncthreads();
        for (int kk = 0; kk < MMA_BK; kk += 16) {
            unsigned a[4][4], b[4][2];
            for (int i = 0; i < 4; ++i) {
                const int r = wm + 16 * i + g;
                a[i][0] = pair(&As[r][kk + 2 * t]);
                a[i][1] = pair(&As[r + 8][kk + 2 * t]);
                a[i][2] = pair(&As[r][kk + 2 * t + 8]);
                a[i][3] = pair(&As[r + 8][kk + 2 * t + 8]);
            }
            for (int j = 0; j < 4; ++j) {
                const int n = wn + 8 * j + g;
                b[j][0] = pair(&Bt[n][kk + 2 * t]);
                b[j][1] = pair(&Bt[n][kk + 2 * t + 8]);
            }
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j)
                    asm volatile(
                        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                        "{%8, %9}, {%0, %1, %2, %3};\n"
                        : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                        : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
        }
        __syncthreads();  // the tiles are overwritten by the next step
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int r = row0 + wm + 16 * i + g, c = col0 + wn + 8 * j + 2 * t;
            *reinterpret_cast<float2*>(C + (size_t)r * N + c) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2*>(C + (size_t)(r + 8) * N + c) = make_float2(acc[i][j][2], acc[i][j][3]);
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


def tiled_launch(kernel, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, k_step: int = BK) -> None:
    """gemm_tiled, gemm_tiled_bf16 (K steps of BK) and gemm_mma_bf16 (K steps of MMA_BK): one block per 128 x 128."""
    (m, k), n = a.shape, b.shape[1]
    if m % BM or n % BN or k % k_step:
        raise ValueError(f"{kernel.name}: M={m}, N={n}, K={k}; it needs M and N multiples of {BM}, K of {k_step}")
    kernel((n // BN, m // BM), 256, a, b, out, np.int32(m), np.int32(n), np.int32(k))


def mma_launch(kernel, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    tiled_launch(kernel, a, b, out, MMA_BK)


def shared_launch(kernel, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    (m, k), n = a.shape, b.shape[1]
    kernel(((n + TS - 1) // TS, (m + TS - 1) // TS), TS * TS, a, b, out, np.int32(m), np.int32(n), np.int32(k))


LAUNCHES = {"gemm_naive": naive_launch, "gemm_shared": shared_launch, "gemm_tiled": tiled_launch}


def gemm(kernel: str) -> CudaExample:
    return CudaExample(GEMM, kernel, square_operands, LAUNCHES[kernel])


def bf16_operands() -> Inputs:
    """tensor_cores: C (fp32) = A (M x K) @ B (K x N) from bf16 operands, 4096³ (32 MiB per operand); smoke 256 x 384
    x 96 (multiples of the block tile and of MMA_BK).

    Minimum bytes: 2(MK + KN) + 4MN; 2MNK flops, which compete with the bf16 tensor-core peak (``dtype``)."""
    m, n, k = context().size((4096, 4096, 4096), (256, 384, 96))
    a, b = randn(m, k, offset=0).bfloat16(), randn(k, n, offset=1).bfloat16()
    work = {"bytes": 2 * (m * k + k * n) + 4 * m * n, "flops": 2 * m * n * k, "dtype": "bf16"}
    return (a, b), torch.empty(m, n, device=a.device), work


def bf16_gemm(kernel: str) -> CudaExample:
    """tensor_cores: both sides accumulate the same bf16 products in fp32, in another order and (on the tensor cores)
    with the MMA unit's own rounding of its sums: compared at rtol 1e-4 instead of fp32's default 1e-5."""
    launch = mma_launch if kernel == "gemm_mma_bf16" else tiled_launch
    return CudaExample(GEMM, kernel, bf16_operands, launch, BenchmarkConfig(rtol=1e-4))
