"""The same forward through ``torch.compile(mode="reduce-overhead")``: fused kernels, replayed from a CUDA graph.

The one idea, as torch packages it: Inductor fuses each residual add with the next norm, and the GELU,
into Triton kernels around the cuBLAS matmuls (~4 kernels per block instead of 5-9), and "reduce-overhead"
records the whole compiled forward in a CUDA graph (CUDA Graph Trees) and replays it: one launch per call.
The module's weights are parameters, which the graph reads in place (static inputs), and the input is copied
into the graph's own input buffer at each call, so the output follows any change of either. Compilation,
the recording and the first replays happen in setup (setup may take minutes: its limit is raised); each
call marks a new step (``torch.compiler.cudagraph_mark_step_begin``) and copies the graph's output, which
the next replay overwrites, into ``out``.

What it should buy on an H100: ~32 kernels at ~2-3 µs inside one graph plus ~20 µs for the launch and the
copies, ≈ 0.1 ms instead of ~0.6-1.3 ms: about 5-10x (almost all of it from the graph: the launch gaps go;
the fusion removes only a few kernels). On a CPU run Inductor compiles C++ kernels and skips CUDA graphs
(there are none): same output to fp32 rounding (the fused norm sums in another order); its kernels also
skip eager PyTorch's per-op dispatch, so a CPU run can show a speedup, which says nothing about the GPU.

Timed with the wall clock, as the baseline. Work per call: as the baseline (common.Stack).
"""

from collections.abc import Callable

import torch

from bench import BenchmarkConfig
from chapters.ch12.common import Stack


class Compiled(Stack):
    # Compiling (Inductor, Triton on a GPU, a C++ compiler on a CPU) happens in setup: 10-60 s cold.
    config = BenchmarkConfig(timing_mode="cpu", setup_timeout_seconds=300)

    def compiled(self) -> Callable[[torch.Tensor], torch.Tensor]:
        fn = torch.compile(self.model, mode="reduce-overhead", fullgraph=True, dynamic=False)

        def forward(x: torch.Tensor) -> torch.Tensor:
            torch.compiler.cudagraph_mark_step_begin()  # the previous call's output has been copied out
            return fn(x)

        for _ in range(3):  # compile, record the graph, replay it: all before the harness's first call
            forward(self.x)
        return forward


def get_benchmark() -> Compiled:
    return Compiled()
