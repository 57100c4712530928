"""Chapter 10's CUDA C++ kernels (``bench.cuda_source``): a histogram too large for one block's shared memory,
built with global atomics or in a thread-block cluster's distributed shared memory (sm_90). Compiled with
NVRTC when a variant sets up on a GPU, and to a CUBIN for sm_90 by the tests on any host
(tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch

from bench import context, cuda_source
from chapters.ch01.common import CudaExample, Inputs, generator

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
