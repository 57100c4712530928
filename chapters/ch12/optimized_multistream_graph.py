"""The same layer captured with each expert on its own stream (fork/join inside the capture): 8 parallel
branches in one graph.

The one idea: a graph keeps the dependencies it was captured with, no more. Forking 8 side streams from the
capture stream (``side.wait_stream(capture)``) and joining them back before the capture ends records each
expert's three kernels as a branch of their own that depends only on the layer's start; at replay the GPU
runs the branches side by side, ~8 small matmuls at once instead of one. Still one graph, one launch.

What it should buy on an H100: the replay takes about one expert's chain (~12 µs) plus the time to stream
the 32 MiB of weights from HBM at ~3 TB/s (~11 µs, the floor once the branches overlap), ≈ 25-35 µs
instead of ~90-100 µs: about 3-4x (~2x if cuBLAS already spreads each small matmul over many SMs with a
split-K kernel: then only the per-kernel latency overlaps). On a CPU run there are no graphs or streams:
the experts run in order, as the baseline: same output, no speedup.

Timed with the default cuda_event clock, as the baseline. Work per call: as the baseline (common.Experts).
"""

from chapters.ch12.common import Experts


class Branches(Experts):
    branches = 8


def get_benchmark() -> Branches:
    return Branches()
