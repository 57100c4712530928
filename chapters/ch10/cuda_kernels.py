"""Chapter 10's CUDA C++ kernels (``bench.cuda_source``): a histogram too large for one block's shared memory,
built with global atomics or in a thread-block cluster's distributed shared memory (sm_90); a stencil over rows
too long for one block, its halos exchanged through global memory or through the cluster's shared memory. Compiled with
NVRTC when a variant sets up on a GPU, and to a CUBIN for sm_90 by the tests on any host
(tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch

from bench import context, cuda_source
from chapters.ch01.common import CudaExample, Inputs, generator, randn

BINS = 32768  # 128 KiB of uint32 counts: over the 48 KiB of static shared memory a block may declare
CLUSTER = 4  # blocks per cluster: each holds BINS / CLUSTER = 8192 counts (32 KiB)
THREADS = 512

HISTOGRAM = cuda_source(
    r"""
#define BINS 32768
#define CLUSTER 4
#define PART (BINS / CLUSTER)

// Every element one atomic add on the histogram in global memory (resolved in L2): 4 bytes read from
// DRAM per element, one L2 atomic per element; adds to one 128-byte line (32 bins) are applied in turn.
extern "C" __global__ void histogram_global(const int* __restrict__ x, unsigned* __restrict__ hist, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(hist + x[i], 1u);
}

// A cluster of 4 blocks holds one private copy of the histogram in its distributed shared memory: block r
// of the cluster owns the bins b with b % CLUSTER == r (consecutive bins, a skewed law's hot head, on
// different SMs). An element's add goes to the owning block's shared memory (local or over the SM-to-SM
// network); at the end each block adds its part, once per bin, into the global histogram: one L2 atomic
// per bin per cluster instead of one per element.
extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1)
histogram_cluster(const int* __restrict__ x, unsigned* __restrict__ hist, long long n) {
    __shared__ unsigned part[PART];
    for (int b = threadIdx.x; b < PART; b += blockDim.x) part[b] = 0;
    // every block of the cluster has zeroed its part before any block adds into it
    __cluster_barrier_arrive();
    __cluster_barrier_wait();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int bin = x[i];
        unsigned* owner = (unsigned*)__cluster_map_shared_rank(part, bin % CLUSTER);
        atomicAdd(owner + bin / CLUSTER, 1u);
    }
    // every add into this block's part has landed, and no block still needs another's shared memory after this
    __cluster_barrier_arrive();
    __cluster_barrier_wait();
    const unsigned rank = __clusterRelativeBlockRank();
    for (int b = threadIdx.x; b < PART; b += blockDim.x)
        if (part[b]) atomicAdd(hist + b * CLUSTER + rank, part[b]);
}
""",
    name="histogram.cu",
    capability=(9, 0),  # thread-block clusters
)


def zipf(n: int, bins: int) -> torch.Tensor:
    """``n`` int32 draws from Zipf's law over ``bins`` ranks (P(k) ∝ 1 / (k + 1), as word counts in text), seeded.

    Over 32768 bins: rank 0 takes 9.1 % of the draws, the first 32 ranks (one 128-byte line of counts) 37 %."""
    ctx = context()
    cdf = (1.0 / torch.arange(1, bins + 1, device=ctx.device, dtype=torch.float64)).cumsum(0)
    u = torch.rand(n, generator=generator(), device=ctx.device, dtype=torch.float64).mul_(cdf[-1])
    return torch.searchsorted(cdf, u, right=True).clamp_(max=bins - 1).to(torch.int32)


def values() -> Inputs:
    """cluster_histogram: 256 Mi int32 token ids (1 GiB) drawn from Zipf's law over BINS ranks, and the BINS counts.

    A vocabulary's counts, not uniform noise: on uniform values the adds hardly contend, the cluster's (3 in 4 of
    them to another SM) cost about what L2's do, and the H200 measured 1.09x. Minimum bytes: the values read once,
    the histogram written once. Smoke: a length no multiple of the grid's threads."""
    ctx = context()
    n = ctx.size(256 * 2**20, 5 * THREADS * CLUSTER + 7)
    x = zipf(n, BINS)
    hist = torch.empty(BINS, device=x.device, dtype=torch.int32)  # uint32 in the kernel; counts stay < 2^31
    return (x,), hist, {"bytes": 4 * n + 4 * BINS}


def blocks() -> int:
    """A grid that fills the GPU: 4 blocks of 512 threads per SM (32 KiB of shared memory each), a multiple of
    the cluster size."""
    facts = context().facts
    return 4 * (facts.cores if facts else 1) // CLUSTER * CLUSTER or CLUSTER


def launch(kernel, x: torch.Tensor, hist: torch.Tensor) -> None:
    hist.zero_()  # part of the call on both sides: the counts start from zero every call
    kernel(blocks(), THREADS, x, hist, np.int64(x.numel()))


def histogram(kernel: str) -> CudaExample:
    return CudaExample(HISTOGRAM, kernel, values, launch)


HALO_CLUSTER, SEGMENT = 8, 4096  # cluster_halo: a row is 8 blocks' segments of 4096 fp32 (128 KiB per row)
ROW = HALO_CLUSTER * SEGMENT
HEAT_THREADS = 256
FLOPS_PER_POINT = 5  # u + C (l - 2u + r): two adds, a multiply, an FMA (two)

HEAT = cuda_source(
    r"""
#define CLUSTER 8
#define SEG 4096             // elements of a row each block holds: 16 KiB, two buffers: 32 KiB
#define ROW (CLUSTER * SEG)  // 32768 fp32, 128 KiB: double-buffered, more than one SM's shared memory
#define THREADS 256
#define C 0.25f              // explicit 1-D heat equation, stable for C <= 0.5

__device__ __forceinline__ float heat(float l, float u, float r) { return u + C * (l - 2.f * u + r); }

// One step over every row (zero beyond a row's ends), one thread per point: the next step's halos come back
// through global memory (L2) and a kernel boundary.
extern "C" __global__ void __launch_bounds__(THREADS)
heat_step(const float* __restrict__ u, float* __restrict__ v, long long n) {
    const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (i >= n) return;
    const int col = (int)(i % ROW);
    const float l = col > 0 ? u[i - 1] : 0.f;
    const float r = col < ROW - 1 ? u[i + 1] : 0.f;
    v[i] = heat(l, u[i], r);
}

// Every step of a row in one cluster of 8 blocks: block r holds segment r in shared memory (two buffers, read
// one and write the other), reads its neighbours' edge points from their shared memory, and the cluster
// meets at a barrier after each step. The row crosses global memory twice: loaded once, stored once.
extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)
heat_cluster(const float* __restrict__ x, float* __restrict__ out, int steps) {
    __shared__ float buf[2][SEG];
    const unsigned rank = __clusterRelativeBlockRank();  // = blockIdx.x % CLUSTER in a 1-D grid
    const long long start = (long long)(blockIdx.x / CLUSTER) * ROW + (long long)rank * SEG;
    for (int j = threadIdx.x; j < SEG; j += THREADS) buf[0][j] = x[start + j];
    __cluster_barrier_arrive();  // every segment loaded before a neighbour reads its edge
    __cluster_barrier_wait();
    for (int s = 0; s < steps; ++s) {
        float* cur = buf[s & 1];
        float* nxt = buf[(s + 1) & 1];
        const float* left = rank > 0 ? (const float*)__cluster_map_shared_rank(cur, rank - 1) : nullptr;
        const float* right = rank < CLUSTER - 1 ? (const float*)__cluster_map_shared_rank(cur, rank + 1) : nullptr;
        for (int j = threadIdx.x; j < SEG; j += THREADS) {
            const float l = j > 0 ? cur[j - 1] : (left ? left[SEG - 1] : 0.f);
            const float r = j < SEG - 1 ? cur[j + 1] : (right ? right[0] : 0.f);
            nxt[j] = heat(l, cur[j], r);
        }
        // step s written in every block, and every read of step s's buffer (a neighbour's too) done before
        // step s + 1 overwrites it
        __cluster_barrier_arrive();
        __cluster_barrier_wait();
    }
    for (int j = threadIdx.x; j < SEG; j += THREADS) out[start + j] = buf[steps & 1][j];
}
""",
    name="heat.cu",
    capability=(9, 0),  # thread-block clusters
)


def heat_rows() -> Inputs:
    """cluster_halo: 96 rows of 32 Ki fp32 (12 MiB; 768 blocks of 8-block clusters, all resident on an H100 or
    H200), 256 steps. Smoke: 2 rows, 5 steps.

    Minimum bytes: x read once and the result written once; FLOPS_PER_POINT per point per step."""
    rows, steps = context().size((96, 256), (2, 5))
    context().record("steps", steps)
    x = randn(rows, ROW)
    work = {"bytes": 8 * x.numel(), "flops": FLOPS_PER_POINT * x.numel() * steps}
    return (x, steps), torch.empty_like(x), work


def global_steps(kernel, x: torch.Tensor, steps: int, out: torch.Tensor, scratch: list[torch.Tensor]) -> None:
    """``steps`` launches of ``heat_step``, ping-ponging between two scratch buffers, the last into ``out``."""
    src, n = x, x.numel()
    for s in range(steps):
        dst = out if s == steps - 1 else scratch[s % 2]
        kernel((n + HEAT_THREADS - 1) // HEAT_THREADS, HEAT_THREADS, src, dst, np.int64(n))
        src = dst


class GlobalHalo(CudaExample):
    """cluster_halo's baseline: two scratch rows-buffers for the steps between x and out."""

    def __init__(self) -> None:
        super().__init__(HEAT, "heat_step", heat_rows, self._launch)

    def setup(self) -> None:
        super().setup()
        self.scratch = [torch.empty_like(self.out) for _ in range(2)]
        self.benchmark_fn()  # the scratch buffers then hold what every call leaves in them: no set-up state changes

    def teardown(self) -> None:
        super().teardown()
        del self.scratch

    def get_inputs(self) -> torch.Tensor:
        return self.args[0]

    def _launch(self, kernel, x: torch.Tensor, steps: int, out: torch.Tensor) -> None:
        global_steps(kernel, x, steps, out, self.scratch)


def cluster_launch(kernel, x: torch.Tensor, steps: int, out: torch.Tensor) -> None:
    kernel(x.shape[0] * HALO_CLUSTER, HEAT_THREADS, x, out, np.int32(steps))


# --- warp_specialization: a stencil streamed through shared memory, one role or producer/consumer warps -----------

TILE_FLOATS, RADIUS, STAGES = 2048, 4, 4  # floats per tile (8 KiB), stencil radius, the specialized ring's buffers
CONSUMERS, PRODUCERS = 256, 32  # threads computing, threads copying (one warp)

STENCIL = cuda_source(
    r"""
#define TILE 2048               // outputs per tile: 8 KiB of fp32
#define RADIUS 4                // a 9-point stencil; the halo of 4 floats is 16 bytes, so 16-byte copies stay aligned
#define SPAN (TILE + 2 * RADIUS)
#define CHUNKS (SPAN / 4)       // 16-byte copies per tile
#define STAGES 4
#define CONSUMERS 256
#define PRODUCERS 32

// 16 bytes of x from float index g into shared memory, asynchronously (cp.async, through L2 only); a chunk wholly
// outside [0, n) is zero-filled by the copy itself (src-size 0). The one chunk that straddles x's end is copied
// a float at a time (a 16-byte cp.async there would address bytes past the allocation, src-size or not): with
// plain loads and stores, or, ASYNC_TAIL, with 4-byte cp.async (an mbarrier tracks only asynchronous copies).
__device__ __forceinline__ void copy_tail_async(float* dst, const float* __restrict__ x, long long g, int valid);
template <bool ASYNC_TAIL = false>
__device__ __forceinline__ void copy_chunk(float* dst, const float* __restrict__ x, long long g, long long n) {
    const long long left = n - g;
    const int valid = g < 0 || left <= 0 ? 0 : left >= 4 ? 4 : (int)left;
    if (valid > 0 && valid < 4) {
        if (ASYNC_TAIL) {
            copy_tail_async(dst, x, g, valid);
        } else {
            for (int i = 0; i < 4; ++i) dst[i] = i < valid ? x[g + i] : 0.f;
        }
        return;
    }
    const float* src = valid ? x + g : x;
    const unsigned addr = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(valid * 4) : "memory");
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void copy_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// mbarriers (8-byte objects in shared memory with a phase bit): the producer's lanes arrive at FULL[s] only when
// their cp.async copies into stage s have landed (cp.async.mbarrier.arrive.noinc); the consumers wait for that phase,
// compute, and arrive at EMPTY[s] (release), where the producer waits (acquire) before refilling s.
__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem(bar)) : "memory");
}
__device__ __forceinline__ void bar_arrive_on_copies(unsigned long long* bar) {  // when this thread's copies land
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem(bar)) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned long long* bar, unsigned parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n"
        "}\n" ::"r"(smem(bar)), "r"(parity) : "memory");
}

// The chunk straddling x's end, for a copier whose completion an mbarrier tracks: four 4-byte cp.async, each
// float inside x copied, the rest zero-filled (src-size 0, from x itself).
__device__ __forceinline__ void copy_tail_async(float* dst, const float* __restrict__ x, long long g, int valid) {
    for (int i = 0; i < 4; ++i) {
        const float* src = i < valid ? x + g + i : x;
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem(dst + i)), "l"(src),
                     "r"(i < valid ? 4 : 0) : "memory");
    }
}

// out[i] = binomial 9-point smoothing of x around i (zero outside x); s is the tile's span, s[j + RADIUS] = x[t0 + j].
// The same expression on both sides: their outputs agree bit for bit.
__device__ __forceinline__ float smooth(const float* s, int j) {
    return (s[j] + s[j + 8] + 8.f * (s[j + 1] + s[j + 7]) + 28.f * (s[j + 2] + s[j + 6]) +
            56.f * (s[j + 3] + s[j + 5]) + 70.f * s[j + 4]) * (1.f / 256.f);
}

__device__ __forceinline__ void compute_tile(const float* s, float* __restrict__ out, long long t0, long long n,
                                             int thread) {
    for (int j = thread; j < TILE; j += CONSUMERS)
        if (t0 + j < n) out[t0 + j] = smooth(s, j);
}

// Baseline: every thread does every job, in turn. Per tile: issue the copies, wait for them, barrier, compute,
// barrier. While the tile is in flight nothing computes; while it is computed nothing is in flight: one tile
// (8 KiB) per SM in flight at a time.
extern "C" __global__ void __launch_bounds__(CONSUMERS)
stencil_single_role(const float* __restrict__ x, float* __restrict__ out, long long n) {
    __shared__ __align__(16) float span[SPAN];
    const long long tiles = (n + TILE - 1) / TILE;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long g0 = t * TILE - RADIUS;
        for (int q = threadIdx.x; q < CHUNKS; q += CONSUMERS) copy_chunk(span + 4 * q, x, g0 + 4 * q, n);
        copy_commit();
        copy_wait<0>();
        __syncthreads();  // every thread's copies landed
        compute_tile(span, out, t * TILE, n, threadIdx.x);
        __syncthreads();  // every read of the span done before the next tile's copies overwrite it
    }
}

// Warp-specialized: warp 8 (the producer) only copies, into a ring of STAGES spans, keeping up to STAGES tiles in
// flight; warps 0-7 (the consumers) only compute. Stage s is handed over with the mbarriers FULL[s] / EMPTY[s]
// (above): tile k uses phase (k / STAGES) & 1 of each. The same tiles per block in the same order as the baseline.
extern "C" __global__ void __launch_bounds__(CONSUMERS + PRODUCERS)
stencil_warp_specialized(const float* __restrict__ x, float* __restrict__ out, long long n) {
    __shared__ __align__(16) float span[STAGES][SPAN];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const long long tiles = (n + TILE - 1) / TILE;
    const int mine = tiles > blockIdx.x ? (int)((tiles - 1 - blockIdx.x) / gridDim.x + 1) : 0;  // tiles of this block
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            bar_init(&full[s], PRODUCERS);   // each producer lane: one arrival when its copies land
            bar_init(&empty[s], CONSUMERS);  // each consumer thread: one arrival when it is done reading
        }
    }
    __syncthreads();  // the barriers initialised before anyone arrives (the only block-wide barrier)
    if (threadIdx.x >= CONSUMERS) {
        const int lane = threadIdx.x - CONSUMERS;
        for (int k = 0; k < mine; ++k) {
            const int s = k % STAGES;
            if (k >= STAGES) bar_wait(&empty[s], ((k / STAGES) - 1) & 1);  // consumers done with tile k - STAGES
            const long long g0 = (blockIdx.x + (long long)k * gridDim.x) * TILE - RADIUS;
            for (int q = lane; q < CHUNKS; q += PRODUCERS) copy_chunk<true>(span[s] + 4 * q, x, g0 + 4 * q, n);
            bar_arrive_on_copies(&full[s]);
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // no copy outlives the block
    } else {
        for (int k = 0; k < mine; ++k) {
            const int s = k % STAGES;
            bar_wait(&full[s], (k / STAGES) & 1);
            compute_tile(span[s], out, (blockIdx.x + (long long)k * gridDim.x) * TILE, n, threadIdx.x);
            bar_arrive(&empty[s]);  // per thread: racecheck reads a warp's one arrival after __syncwarp as a race
        }
    }
}
""",
    name="stencil_stream.cu",
)


def signal() -> Inputs:
    """warp_specialization: 256 Mi fp32 (1 GiB, over 16x an H200's L2) smoothed by a 9-point stencil; a length
    that is no multiple of a tile or of a 16-byte copy at both sizes. Smoke: 41 tiles and a bit.

    Minimum bytes: x read once and out written once (8 bytes a point); 17 flops a point."""
    n = context().size(256 * 2**20 + 3, 41 * TILE_FLOATS + 13)
    x = randn(n)
    return (x,), torch.empty_like(x), {"bytes": 8 * n, "flops": 17 * n}


def stencil(kernel: str) -> CudaExample:
    """The same persistent grid on both sides: one block per SM (3 at smoke size, so each block's ring wraps)."""
    threads = CONSUMERS + (PRODUCERS if kernel == "stencil_warp_specialized" else 0)

    def launch(k, x: torch.Tensor, out: torch.Tensor) -> None:
        facts = context().facts
        k(context().size(facts.cores if facts else 1, 3), threads, x, out, np.int64(x.numel()))

    return CudaExample(STENCIL, kernel, signal, launch)
