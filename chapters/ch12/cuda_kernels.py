"""Chapter 12's CUDA C++ kernels (``bench.cuda_source``) and a graph with a conditional WHILE node (``cuda.bindings``'
driver API): an iteration run until it converges, its loop driven by the host or by the graph itself. Compiled with
NVRTC when a variant sets up on a GPU, and to a CUBIN for sm_90 by the tests on any host
(tests/chapters/test_cuda_sources.py).

The problem (``converge``): Jacobi sweeps for the tridiagonal system (2 + SHIFT) x_i - x_(i-1) - x_(i+1) = b_i (zero
beyond the ends), from x = 0, until the largest change of a sweep is at most TOL (or MAX_ITERS sweeps). Each sweep is
one small kernel (``jacobi_sweep``: 1 Mi points, 12 MiB, L2-resident) that also folds its largest change into a
device word; a one-thread kernel then decides whether to go on. ~810 sweeps per call at full size; both sides run
the same sweeps in the same order, stop at the same sweep (a maximum is exact in any order) and agree bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bench import context, cuda_source
from chapters.ch01.common import cuda_driver, driver_ok
from chapters.ch12.common import Shell, randn

THREADS = 256
TOL, MAX_ITERS = 1e-4, 5000  # the stop: the largest change of a sweep, the most sweeps (the kernel's SHIFT = 0.02
# makes each sweep shrink the error by ~0.99: ~810 sweeps from x = 0)

SMOKE_ITERS = 64

JACOBI = cuda_source(
    r"""
// The device side of a conditional node (CUDA 12.4+): NVRTC has no header for it, the driver resolves the builtin.
typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                       unsigned int value);
#define THREADS 256
#define SHIFT 0.02f

// state[0]: sweeps done; state[1]: the largest |change| of the last sweep (fp32 bits: non-negative floats order
// as unsigned ints); state[2]: 1 while the loop is to go on.

// One sweep: x_new[i] = (b[i] + x[i-1] + x[i+1]) / (2 + SHIFT), from x0 into x1 after an even number of sweeps,
// from x1 into x0 after an odd one (the parity is read on the device: a graph's kernel arguments are fixed).
extern "C" __global__ void __launch_bounds__(THREADS)
jacobi_sweep(const float* __restrict__ b, float* __restrict__ x0, float* __restrict__ x1, unsigned* __restrict__ state,
             int n) {
    __shared__ float warp_max[THREADS / 32];
    const bool odd = state[0] & 1u;
    const float* src = odd ? x1 : x0;
    float* dst = odd ? x0 : x1;
    const int i = blockIdx.x * THREADS + threadIdx.x;
    float change = 0.f;
    if (i < n) {
        const float l = i > 0 ? src[i - 1] : 0.f, r = i < n - 1 ? src[i + 1] : 0.f;
        const float v = (b[i] + l + r) / (2.f + SHIFT);
        dst[i] = v;
        change = fabsf(v - src[i]);
    }
    for (int o = 16; o > 0; o >>= 1) change = fmaxf(change, __shfl_xor_sync(0xffffffffu, change, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = change;
    __syncthreads();
    if (threadIdx.x < 32) {
        float m = threadIdx.x < THREADS / 32 ? warp_max[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (threadIdx.x == 0) atomicMax(state + 1, __float_as_uint(m));
    }
}

__device__ unsigned advance(unsigned* state, float tol, unsigned max_iters) {
    const unsigned done = state[0] + 1;
    const unsigned more = __uint_as_float(state[1]) > tol && done < max_iters;
    state[0] = done;
    state[1] = 0u;
    state[2] = more;
    return more;
}

// After each sweep, one thread: count it, clear the maximum, say whether to go on (for the host to read).
extern "C" __global__ void jacobi_check(unsigned* state, float tol, unsigned max_iters) {
    advance(state, tol, max_iters);
}

// The same, and the answer set as the graph's WHILE condition: the next iteration is the device's decision.
extern "C" __global__ void jacobi_check_graph(unsigned* state, float tol, unsigned max_iters,
                                              cudaGraphConditionalHandle loop) {
    cudaGraphSetConditional(loop, advance(state, tol, max_iters));
}

// The converged x into out: x0 after an even number of sweeps, x1 after an odd one.
extern "C" __global__ void __launch_bounds__(THREADS)
jacobi_result(const float* __restrict__ x0, const float* __restrict__ x1, const unsigned* __restrict__ state,
              float* __restrict__ out, int n) {
    const int i = blockIdx.x * THREADS + threadIdx.x;
    if (i < n) out[i] = state[0] & 1u ? x1[i] : x0[i];
}
""",
    name="jacobi.cu",
)


class Converge(Shell):
    """converge: Jacobi sweeps on ``b`` until converged (module docstring); each call starts again from x = 0.

    ``benchmark_fn``: reset, the loop (``loop()``, the only difference between the sides), the result kernel. Timed on
    the wall clock (the host's part of the loop is the cost). Work per call: 12 bytes a point a sweep (b and x read,
    x written), 4 flops a point a sweep; the sweep count is recorded (``iterations``)."""

    def prepare(self) -> None:
        ctx = context()
        self.kernels = {name: JACOBI.kernel(name) for name in ("jacobi_sweep", self.check, "jacobi_result")}
        self.n = ctx.size(2**20, 1000 + 7)
        self.b = randn(self.n, offset=0)
        self.x0, self.x1 = torch.zeros_like(self.b), torch.empty_like(self.b)
        self.state = torch.zeros(3, dtype=torch.int32, device=ctx.device)  # unsigned in the kernels
        self.out = torch.empty_like(self.b)
        self.grid = (self.n + THREADS - 1) // THREADS
        # Smoke: at most SMOKE_ITERS sweeps (the cap's path, both sides alike): under compute-sanitizer every
        # launch costs milliseconds, and ~810 sweeps a call did not finish in 100 s on an H200.
        self.tol, self.max_iters = np.float32(TOL), np.uint32(ctx.size(MAX_ITERS, SMOKE_ITERS))

    check = "jacobi_check"

    def setup(self) -> None:
        super().setup()  # prepare() and one untimed call
        iterations = int(self.state[0].item())
        context().record("iterations", iterations)
        self.work = {"bytes": 12 * self.n * iterations, "flops": 4 * self.n * iterations}

    def sweep(self, stream: Any = None) -> None:
        self.kernels["jacobi_sweep"](self.grid, THREADS, self.b, self.x0, self.x1, self.state, np.int32(self.n),
                                     stream=stream)  # fmt: skip

    def loop(self) -> None:
        raise NotImplementedError

    def benchmark_fn(self) -> None:
        self.x0.zero_()
        self.state.zero_()
        self.loop()
        self.kernels["jacobi_result"](self.grid, THREADS, self.x0, self.x1, self.state, self.out, np.int32(self.n))

    def get_inputs(self) -> torch.Tensor:
        return self.b


class HostLoop(Converge):
    """The host drives the loop: sweep, check, then read the flag (``.item()``: a copy to the host that waits for the
    GPU to drain) to decide whether to launch the next sweep."""

    def loop(self) -> None:
        check = self.kernels["jacobi_check"]
        while True:
            self.sweep()
            check(1, 1, self.state, self.tol, self.max_iters)
            if not self.state[2].item():
                break


class GraphLoop(Converge):
    """The device drives the loop: one graph holding a conditional WHILE node whose body is the sweep and
    ``jacobi_check_graph``, which sets the node's condition; one graph launch per call, no host round trip."""

    check = "jacobi_check_graph"

    def prepare(self) -> None:
        super().prepare()
        self.graph, self.exec = build_while_graph(self.body)
        self.teardown_graph = True

    def body(self, stream: Any, handle: Any) -> None:
        self.sweep(stream)
        self.kernels["jacobi_check_graph"](1, 1, self.state, self.tol, self.max_iters, np.uint64(int(handle)),
                                           stream=stream)  # fmt: skip

    def loop(self) -> None:
        stream = torch.cuda.current_stream(self.b.device).cuda_stream
        driver_ok(cuda_driver().cuGraphLaunch(self.exec, cuda_driver().CUstream(stream)), "cuGraphLaunch")

    def teardown(self) -> None:
        if getattr(self, "teardown_graph", False):
            torch.cuda.synchronize(self.b.device)
            driver_ok(cuda_driver().cuGraphExecDestroy(self.exec), "cuGraphExecDestroy")
            driver_ok(cuda_driver().cuGraphDestroy(self.graph), "cuGraphDestroy")
        super().teardown()


def build_while_graph(body: Any) -> tuple[Any, Any]:
    """A graph of one conditional WHILE node (its condition 1 at each launch, so the body runs at least once), the
    body captured from ``body(stream, handle)`` on a side stream; the graph and its executable form."""
    driver = cuda_driver()
    graph = driver_ok(driver.cuGraphCreate(0), "cuGraphCreate")
    ctx = driver_ok(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    create = driver.cuGraphConditionalHandleCreate(graph, ctx, 1, driver.CU_GRAPH_COND_ASSIGN_DEFAULT)
    handle = driver_ok(create, "cuGraphConditionalHandleCreate")
    params = driver.CUgraphNodeParams()
    params.type = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    params.conditional.handle = handle
    params.conditional.type = driver.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
    params.conditional.size = 1
    params.conditional.ctx = ctx
    driver_ok(driver.cuGraphAddNode(graph, None, None, 0, params), "cuGraphAddNode (conditional)")
    if not params.conditional.phGraph_out:  # cuda-bindings >= 12.4 fills it with the node's body graph
        raise RuntimeError("cuGraphAddNode returned no body graph for the conditional node (cuda-bindings >= 12.4)")
    stream = torch.cuda.Stream(device=torch.cuda.current_device())
    # the body's buffers, made on torch's stream, finished before a side stream captures their addresses: under
    # compute-sanitizer a WHILE graph captured right after its buffers' allocation faults at launch with no error
    # reported (NVIDIA/warp#1406 saw it; a sync between allocation and capture avoids it there)
    torch.cuda.synchronize()
    mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    body_graph, capture = params.conditional.phGraph_out[0], driver.CUstream(stream.cuda_stream)
    begin = driver.cuStreamBeginCaptureToGraph(capture, body_graph, None, None, 0, mode)
    driver_ok(begin, "cuStreamBeginCaptureToGraph")
    try:
        body(stream, handle)
    finally:
        driver_ok(driver.cuStreamEndCapture(capture), "cuStreamEndCapture")
    return graph, driver_ok(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
