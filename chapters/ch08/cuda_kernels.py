"""Chapter 8's CUDA C++ kernels (``bench.cuda_source``): a block's sum through a shared-memory tree or through
warp shuffles. Compiled with NVRTC when a variant sets up on a GPU, and to a CUBIN for sm_90 by the tests on
any host (tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch

from bench import context, cuda_source
from chapters.ch01.common import CudaExample, Inputs, generator, randn

THREADS = 256  # per block; one block per row

# Both kernels: one block per row, each thread sums a strided slice of the row (coalesced), then the block
# combines its 256 partial sums: the only difference between the two.
ROW_SUMS = cuda_source(
    r"""
#define THREADS 256
__device__ float thread_sum(const float* __restrict__ row, int n) {
    float acc = 0.f;
    for (int i = threadIdx.x; i < n; i += THREADS) acc += row[i];
    return acc;
}

// 256 partial sums halved 8 times through shared memory, a block-wide barrier after each step.
extern "C" __global__ void __launch_bounds__(THREADS)
row_sums_tree(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float s[THREADS];
    s[threadIdx.x] = thread_sum(x + (size_t)blockIdx.x * n, n);
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// Each warp sums its 32 values in registers (5 shuffles, no barrier), one shared-memory exchange of the 8
// warp sums, and the first warp sums those the same way.
__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
row_sums_shuffle(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float warp_sums[THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_sum(thread_sum(x + (size_t)blockIdx.x * n, n));
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < THREADS / 32 ? warp_sums[lane] : 0.f);
        if (lane == 0) out[blockIdx.x] = v;
    }
}
""",
    name="row_sums.cu",
)


def short_rows() -> Inputs:
    """warp_reduce: 128 Ki rows of 1024 fp32 (512 MiB, over 8x an H200's L2): 4 elements per thread, so the
    block's combine step is a large share of each block's life. Smoke: rows no multiple of the block.

    Minimum bytes: x read once, M sums written; MN adds (counted as flops)."""
    m, n = context().size((128 * 1024, 1024), (37, 3 * THREADS + 7))
    x = randn(m, n)
    return (x,), torch.empty(m, device=x.device), {"bytes": 4 * m * n + 4 * m, "flops": m * n}


def row_sums(kernel: str) -> CudaExample:
    def launch(k, x: torch.Tensor, out: torch.Tensor) -> None:
        k(x.shape[0], THREADS, x, out, np.int32(x.shape[1]))

    return CudaExample(ROW_SUMS, kernel, short_rows, launch)


CATEGORIES = 4  # bins of warp_aggregated_atomics: a warp's 32 elements fall in at most 4 of them

COUNT = cuda_source(
    r"""
#define CATEGORIES 4
// Both kernels: counts[c] = how many x[i] == c, grid-stride over x; each warp walks 32 consecutive elements
// per step (base is the warp's first element, the same for its 32 lanes, so they loop together).

// One atomic per element: a warp's 32 atomics go to at most 4 addresses, in one L2 slice, one at a time.
extern "C" __global__ void count_per_element(const int* __restrict__ x, int* __restrict__ counts, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(counts + x[i], 1);
}

// Lanes holding the same category find each other (__match_any_sync), and the lowest of them adds their number:
// at most 4 atomics per warp step instead of 32.
extern "C" __global__ void count_per_warp(const int* __restrict__ x, int* __restrict__ counts, long long n) {
    const int lane = threadIdx.x % 32;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x + threadIdx.x - lane; base < n; base += stride) {
        const long long i = base + lane;
        const bool valid = i < n;
        const unsigned active = __ballot_sync(0xffffffffu, valid);  // the lanes with an element (the tail: fewer)
        if (valid) {
            const int c = x[i];
            const unsigned peers = __match_any_sync(active, c);
            if (lane == __ffs(peers) - 1) atomicAdd(counts + c, __popc(peers));
        }
    }
}
""",
    name="count.cu",
)


def categories() -> Inputs:
    """warp_aggregated_atomics: 64 Mi int32 labels (256 MiB) drawn uniformly from [0, CATEGORIES), and their counts.

    Minimum bytes: the labels read once, the counts written. Smoke: a length no multiple of a warp."""
    ctx = context()
    n = ctx.size(64 * 2**20, 5 * THREADS + 7)
    x = torch.randint(CATEGORIES, (n,), generator=generator(), device=ctx.device, dtype=torch.int32)
    return (x,), torch.empty(CATEGORIES, device=x.device, dtype=torch.int32), {"bytes": 4 * n + 4 * CATEGORIES}


def count_launch(kernel, x: torch.Tensor, counts: torch.Tensor) -> None:
    counts.zero_()  # part of the call on both sides
    facts = context().facts
    kernel(8 * (facts.cores if facts else 1), THREADS, x, counts, np.int64(x.numel()))


def count(kernel: str) -> CudaExample:
    return CudaExample(COUNT, kernel, categories, count_launch)


UNROLL = 8  # unrolled_loads: independent loads a thread issues before it adds them

PARTIAL_SUMS = cuda_source(
    r"""
#define THREADS 256
#define UNROLL 8
// Both kernels: a full-occupancy grid (8 blocks of 256 per SM), each thread summing the elements t, t + stride,
// t + 2 stride, ... in that order, then the block's 256 sums by shuffles: out[block] = the block's partial sum.
// The per-thread order of additions is the same on both sides: the outputs agree bit for bit.
__device__ __forceinline__ float warp_total(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ void store_block_sum(float acc, float* __restrict__ out) {
    __shared__ float warp_sums[THREADS / 32];
    acc = warp_total(acc);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = warp_total(threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.f);
        if (threadIdx.x == 0) out[blockIdx.x] = acc;
    }
}

// One load per iteration, added before the next is issued: each thread has one 4-byte load in flight, 8 KiB per
// SM at full occupancy, and waits out DRAM latency on every element.
extern "C" __global__ void __launch_bounds__(THREADS)
partial_sums_rolled(const float* __restrict__ x, float* __restrict__ out, long long n) {
    const long long stride = (long long)gridDim.x * THREADS;
    float acc = 0.f;
#pragma unroll 1
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) acc += x[i];
    store_block_sum(acc, out);
}

// Unrolled by hand: UNROLL independent loads issued back to back, then added in the same order: 8 loads in
// flight per thread (64 KiB per SM), one DRAM latency per 8 elements. The tail (fewer than UNROLL strides left)
// one by one.
extern "C" __global__ void __launch_bounds__(THREADS)
partial_sums_unrolled(const float* __restrict__ x, float* __restrict__ out, long long n) {
    const long long stride = (long long)gridDim.x * THREADS;
    float acc = 0.f;
    long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        float v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) v[k] = x[i + k * stride];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) acc += v[k];
    }
    for (; i < n; i += stride) acc += x[i];
    store_block_sum(acc, out);
}
""",
    name="partial_sums.cu",
)


def long_vector() -> Inputs:
    """unrolled_loads: 256 Mi fp32 (1 GiB, over 16x an H200's L2) and one partial sum per block. Smoke: a length
    that leaves every thread a tail.

    Minimum bytes: x read once (the sums are a few KiB); one add an element."""
    n = context().size(256 * 2**20 + 3, 9 * 2 * THREADS * UNROLL + 5)
    x = randn(n)
    return (x,), torch.empty(sum_blocks(), device=x.device), {"bytes": 4 * n, "flops": n}


def sum_blocks() -> int:
    """Full occupancy, once: 8 blocks of 256 threads per SM (2048 threads, the SM's limit); 2 at smoke size."""
    facts = context().facts
    return context().size(8 * (facts.cores if facts else 1), 2)


def partial_sums(kernel: str) -> CudaExample:
    def launch(k, x: torch.Tensor, out: torch.Tensor) -> None:
        k(out.numel(), THREADS, x, out, np.int64(x.numel()))

    return CudaExample(PARTIAL_SUMS, kernel, long_vector, launch)


BINS = 256  # shared_atomics: one bin per byte value

BYTE_HISTOGRAM = cuda_source(
    r"""
#define THREADS 256
#define BINS 256
// Both kernels: a histogram of n bytes (0-255), each thread reading 16 bytes at a time (one uint4, coalesced) with a
// grid stride and adding each byte's count; the last n % 16 bytes one by one. Only where the adds land differs.
template <typename Add>
__device__ __forceinline__ void count_bytes(const unsigned char* __restrict__ x, long long n, Add add) {
    const long long stride = (long long)gridDim.x * THREADS, first = (long long)blockIdx.x * THREADS + threadIdx.x;
    const long long vectors = n / 16;
    for (long long v = first; v < vectors; v += stride) {
        const uint4 q = reinterpret_cast<const uint4*>(x)[v];  // x is 16-byte aligned (a torch allocation)
        const unsigned words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int w = 0; w < 4; ++w)
#pragma unroll
            for (int b = 0; b < 4; ++b) add((words[w] >> (8 * b)) & 0xffu);
    }
    for (long long i = vectors * 16 + first; i < n; i += stride) add(x[i]);
}

// Every byte one atomic add on the histogram in global memory: all 132 SMs' adds meet in the 256 counters' L2
// lines, where same-address atomics are applied one after another.
extern "C" __global__ void __launch_bounds__(THREADS)
byte_histogram_global(const unsigned char* __restrict__ x, unsigned* __restrict__ hist, long long n) {
    count_bytes(x, n, [&](unsigned bin) { atomicAdd(hist + bin, 1u); });
}

// Privatized: each block counts into its own 256 counters in shared memory (atomics resolved in the SM), then adds
// each non-zero counter to the global histogram once: 256 global atomics per block instead of one per byte.
extern "C" __global__ void __launch_bounds__(THREADS)
byte_histogram_shared(const unsigned char* __restrict__ x, unsigned* __restrict__ hist, long long n) {
    __shared__ unsigned counts[BINS];
    for (int b = threadIdx.x; b < BINS; b += THREADS) counts[b] = 0u;
    __syncthreads();  // zeroed before any add
    count_bytes(x, n, [&](unsigned bin) { atomicAdd(counts + bin, 1u); });
    __syncthreads();  // every add landed before the counters are read
    for (int b = threadIdx.x; b < BINS; b += THREADS)
        if (counts[b]) atomicAdd(hist + b, counts[b]);
}
""",
    name="byte_histogram.cu",
)


def pixels() -> Inputs:
    """shared_atomics: 256 Mi bytes (an 8-bit image stack, 256 MiB) drawn uniformly, and their 256 counts. Smoke: a
    length that leaves a tail of bytes after the 16-byte vectors.

    Minimum bytes: the bytes read once, the counts written."""
    ctx = context()
    n = ctx.size(256 * 2**20 + 9, 5 * 16 * THREADS + 9)
    x = torch.randint(256, (n,), generator=generator(), device=ctx.device, dtype=torch.uint8)
    return (x,), torch.empty(BINS, device=x.device, dtype=torch.int32), {"bytes": n + 4 * BINS}


def byte_histogram(kernel: str) -> CudaExample:
    return CudaExample(BYTE_HISTOGRAM, kernel, pixels, count_launch)
