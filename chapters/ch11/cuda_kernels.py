"""Chapter 11's CUDA C++ kernel (``bench.cuda_source``): a latency-bound task that fills one SM, launched once per
task on one stream or dealt to many (Hyper-Q). Compiled with NVRTC when a variant sets up on a GPU, and to a
CUBIN for sm_90 by the tests on any host (tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

import numpy as np

from bench import context, cuda_source
from chapters.ch01.common import busiest_lane_ms, stated_ceiling
from chapters.ch11.common import Pair, fork, join, lanes, on, randn

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
