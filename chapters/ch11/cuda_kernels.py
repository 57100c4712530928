"""Chapter 11's CUDA C++ kernel (``bench.cuda_source``): a latency-bound task that fills one SM, launched once per
task on one stream or dealt to many (Hyper-Q). Compiled with NVRTC when a variant sets up on a GPU, and to a
CUBIN for sm_90 by the tests on any host (tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np
import torch

from bench import context, cuda_source
from chapters.ch01.common import busiest_lane_ms, stated_ceiling
from chapters.ch11.common import Pair, fork, join, lanes, on, randn, side_streams

WIDTH = 128  # threads of a task's single block: one per element of its row

CHAIN = cuda_source(
    r"""
// One block per task: each thread runs a dependent chain of FMAs on its element (4 cycles of latency each,
// one warp-instruction in flight per warp), so a task holds one SM for steps x ~4 cycles and leaves the
// other 131 idle.
extern "C" __global__ void __launch_bounds__(128)
fma_chain(const float* __restrict__ x, float* __restrict__ out, int steps) {
    float v = x[threadIdx.x];
    // v grows ~e^(steps / 10^4): e^20 ~ 5e8 at 200,000 steps, well inside fp32
    for (int s = 0; s < steps; ++s) v = fmaf(v, 1.0001f, 0.001f);
    out[threadIdx.x] = v;
}
""",
    name="fma_chain.cu",
)


class Tasks(Pair):
    """hyper_q: 64 independent tasks, one ``fma_chain`` launch of one 128-thread block each (rows of x and out).

    ``streams``: how many streams the tasks are dealt to in turn (1: the current stream). Work per call, both
    sides: 2 flops per step per thread; the stated ceiling is the busiest stream's kernels, each timed alone
    in setup (the roofline does not bind a latency-bound chain).
    """

    streams = 1

    def prepare(self) -> None:
        ctx = context()
        self.kernel = CHAIN.kernel("fma_chain")  # skips on a host without a GPU
        tasks, steps = ctx.size((64, 200_000), (6, 500))
        ctx.record("tasks", tasks)
        self.steps = np.int32(steps)
        self.x = randn(tasks, WIDTH, offset=0)
        self.out = self.x.new_empty(tasks, WIDTH)
        self.lanes = lanes(self.streams)
        self.work = {"bytes": 8 * self.x.numel(), "flops": 2 * steps * self.x.numel()}
        busiest = busiest_lane_ms([lambda t=t: self.task(t) for t in range(tasks)], self.streams)
        what = f"the busiest of its {self.streams} stream(s)' kernels, each timed alone in setup"
        self.work |= stated_ceiling(what, busiest)

    def task(self, t: int) -> None:
        self.kernel(1, WIDTH, self.x[t], self.out[t], self.steps)

    def benchmark_fn(self) -> None:
        fork(self.lanes)
        for t in range(self.x.shape[0]):
            with on(self.lanes[t % len(self.lanes)]):
                self.task(t)
        join(self.lanes)


# --- stream_priorities: a latency-critical chain of kernels beside a GPU-filling bulk kernel ----------------------

BULK_THREADS, LANES = 128, 32  # threads per bulk block; lanes of the critical kernels (one warp)

PRIORITY = cuda_source(
    r"""
#define BULK_THREADS 128
#define LANES 32
// Bulk work: every thread a dependent chain of FMAs on its own element. At 16 blocks per SM (2048 threads) the
// schedulers' issue slots are the limit: the kernel runs at the fp32 FMA peak, in waves of short blocks.
extern "C" __global__ void __launch_bounds__(BULK_THREADS)
fma_rows(const float* __restrict__ x, float* __restrict__ out, int steps) {
    const long long i = (long long)blockIdx.x * BULK_THREADS + threadIdx.x;
    float v = x[i];
    for (int s = 0; s < steps; ++s) v = fmaf(v, 1.0001f, 0.001f);  // grows ~e^(steps / 10^4): 1.2x at 2000
    out[i] = v;
}

// Latency-critical work: one warp, each lane following a random cycle through a table larger than L2, one
// dependent DRAM load per hop (~0.6-0.8 µs): a kernel of 64 hops takes ~50 µs and needs almost nothing of the SM
// but a slot to start in.
extern "C" __global__ void __launch_bounds__(LANES)
chase(const int* __restrict__ next, const int* __restrict__ start, int* __restrict__ end, int hops) {
    int i = start[threadIdx.x];
    for (int h = 0; h < hops; ++h) i = next[i];
    end[threadIdx.x] = i;
}
""",
    name="priority.cu",
)


class Priorities(Pair):
    """stream_priorities: a bulk kernel of many short blocks (every SM full, in ~160 waves) on one side stream,
    then a chain of 32 small dependent kernels (each waits for the last's result) on another, joined at the end.

    ``critical_priority``: the chain's stream priority (0: the default, as the bulk's; -1: higher). The block
    scheduler dispatches pending blocks of a higher-priority stream first as SM slots free up; at equal priority
    the later kernel waits until the earlier one has dispatched its last block. Work per call, both sides: the
    bulk's FMAs (2 flops each) and bytes; the chain's loads are latency, not work. Roofline: fp32 peak, which
    the bulk alone reaches: a call that hides the whole chain behind the bulk runs at it.
    """

    critical_priority = 0

    def prepare(self) -> None:
        ctx = context()
        self.bulk, self.chase = PRIORITY.kernel("fma_rows"), PRIORITY.kernel("chase")  # skips without a GPU
        facts = ctx.facts
        sms = facts.cores if facts else 1
        waves, self.steps, table, self.hops, self.links = ctx.size((160, 2000, 32 * 2**20, 64, 32), (3, 50, 4099, 8, 4))
        blocks = 16 * sms * waves
        self.x = randn(blocks, BULK_THREADS, offset=0)
        self.out = (torch.empty_like(self.x), torch.empty(self.links, LANES, dtype=torch.int32, device=ctx.device))
        gen = torch.Generator(device=ctx.device).manual_seed(ctx.seed + 1)
        order = torch.randperm(table, generator=gen, device=ctx.device)
        self.next = torch.empty(table, dtype=torch.int32, device=ctx.device)
        self.next[order] = order.roll(-1).int()  # one cycle through the whole table: no lane falls into a short loop
        self.start = order[:: table // LANES][:LANES].int().contiguous()
        self.streams = side_streams(1) + [torch.cuda.Stream(ctx.device, priority=self.critical_priority)]
        ctx.record("critical_stream_priority", self.streams[1].priority)
        self.work = {"bytes": 8 * self.x.numel(), "flops": 2 * self.steps * self.x.numel()}

    def benchmark_fn(self) -> None:
        bulk_out, ends = self.out
        fork(self.streams)
        self.bulk(self.x.shape[0], BULK_THREADS, self.x, bulk_out, np.int32(self.steps), stream=self.streams[0])
        for k in range(self.links):
            start = self.start if k == 0 else ends[k - 1]
            self.chase(1, LANES, self.next, start, ends[k], np.int32(self.hops), stream=self.streams[1])
        join(self.streams)

    def get_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x, self.start
