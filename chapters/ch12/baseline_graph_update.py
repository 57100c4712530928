"""A step graph re-captured for every new parameter value: capture + instantiate + launch, 8 times per call.

Each step of common.Denoise computes x = x - sigma_i * f(x) with a sigma that changes every step. Captured
with sigma as a Python float, the value is a kernel argument frozen into the graph, so a graph serves one
value only and every new value needs a new graph: the host issues the step's ~20 kernels into a capture,
the driver instantiates the graph (cudaGraphInstantiate: builds and uploads the launch plan), and the
replay launches it, each step. This is done here as cheaply as torch allows: the low-level
``capture_begin``/``capture_end`` on one capture stream, one memory pool shared from graph to graph (its
memory is reused, nothing is allocated per step), none of ``torch.cuda.graph``'s synchronize, garbage collection
and cache emptying. Expected on an H100 host: ~20 kernels issued in capture (~5-10 µs each) + instantiation
and first launch (~50-200 µs) ≈ 0.2-0.4 ms per step, ~1.6-3.2 ms per call, the GPU (~50 µs per step)
idle most of it.

Timed with the wall clock (timing_mode="cpu"): the host's capture work is the cost. On a CPU run there are
no graphs: each step runs eagerly with the float. Work per call: common.Denoise.
"""

import torch

from bench import context
from chapters.ch12.common import Denoise


class Recapture(Denoise):
    def load_schedule(self, sigmas: torch.Tensor) -> None:
        self.sigmas = sigmas  # host memory: read as Python floats, as a scalar parameter arrives
        self.graph = None
        self.pool = None
        if context().is_cuda:
            self.x.copy_(self.x0)
            for _ in range(3):  # lazy initialisation (cuBLAS handles, workspaces) must not happen in a capture
                self.step(0.0)
            self.pool = torch.cuda.graph_pool_handle()
            self.capture_stream = torch.cuda.Stream()

    def update(self, i: int) -> None:
        sigma = float(self.sigmas[i])
        if self.pool is None:
            self.step(sigma)
            return
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self.capture_stream):
            graph.capture_begin(pool=self.pool)  # the pool the previous graph holds: its memory is reused
            self.step(sigma)  # sigma becomes an argument of the captured multiply
            graph.capture_end()  # and cudaGraphInstantiate
        # The previous step's graph goes (its replay, already queued, completes first: CUDA frees it after);
        # it is dropped only now so that the shared pool is never left without a graph, which would free it.
        self.graph = graph
        graph.replay()


def get_benchmark() -> Recapture:
    return Recapture()
