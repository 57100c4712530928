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
// DRAM per element, one L2 atomic per element.
extern "C" __global__ void histogram_global(const int* __restrict__ x, unsigned* __restrict__ hist, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(hist + x[i], 1u);
}

// A cluster of 4 blocks holds one private copy of the histogram in its distributed shared memory: block r
// of the cluster owns bins [r * PART, (r + 1) * PART). An element's add goes to the owning block's shared
// memory (local or over the SM-to-SM network); at the end each block adds its part, once per bin, into the
// global histogram: one L2 atomic per bin per cluster instead of one per element.
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
        unsigned* owner = (unsigned*)__cluster_map_shared_rank(part, bin / PART);
        atomicAdd(owner + bin % PART, 1u);
    }
    // every add into this block's part has landed, and no block still needs another's shared memory after this
    __cluster_barrier_arrive();
    __cluster_barrier_wait();
    const unsigned rank = __clusterRelativeBlockRank();
    for (int b = threadIdx.x; b < PART; b += blockDim.x)
        if (part[b]) atomicAdd(hist + rank * PART + b, part[b]);
}
""",
    name="histogram.cu",
    capability=(9, 0),  # thread-block clusters
)


def values() -> Inputs:
    """cluster_histogram: 256 Mi int32 values (1 GiB) drawn uniformly from [0, BINS), and the BINS counts.

    Minimum bytes: the values read once, the histogram written once. Smoke: a length no multiple of the grid's
    threads."""
    ctx = context()
    n = ctx.size(256 * 2**20, 5 * THREADS * CLUSTER + 7)
    x = torch.randint(BINS, (n,), generator=generator(), device=ctx.device, dtype=torch.int32)
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
