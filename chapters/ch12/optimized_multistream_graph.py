"""The same layer captured with each expert on its own stream (fork/join inside the capture): 8 parallel
branches in one graph.

The one idea: a graph keeps the dependencies it was captured with, no more. Forking 8 side streams from the
capture stream (``side.wait_stream(capture)``) and joining them back before the capture ends records each
expert's kernels as a branch of their own that depends only on the layer's start; at replay the GPU
runs the branches side by side, ~8 small matmuls at once instead of one. Still one graph, one launch.

What it should buy on an H100: the replay takes about its longest branch. scripts/timing/experts_probe.py
(docs/results/h100.md) shows each expert as cuBLAS runs it: five kernels of ~1.5-7 µs (a split-K sgemm and
its reduction, the gelu, again a split-K sgemm and its reduction), ~20 µs alone per expert, and 32 µs for
the expert of 2 rows (whose second product gets a 16-block gemmSN kernel of ~19 µs); the 32 MiB of weights
would take ~11 µs at ~3 TB/s, so the chains, not the bytes, set the floor: ~150-170 µs on one stream (the
chains end to end), at best the longest chain, ~32 µs, branched: up to ~4.5x. The stated ceiling
(common.Experts) is the busiest stream's experts replayed alone: here the longest expert. On a CPU run there
are no graphs or streams: the experts run in order, as the baseline: same output, no speedup.

Timed with the default cuda_event clock, as the baseline. Work per call: as the baseline (common.Experts).
"""

from chapters.ch12.common import Experts


class Branches(Experts):
    branches = 8


def get_benchmark() -> Branches:
    return Branches()
