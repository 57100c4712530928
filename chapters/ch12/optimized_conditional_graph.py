"""The same iteration as one CUDA graph with a conditional WHILE node: the device decides whether to go on.

The one idea (cuda_kernels.GraphLoop, ``build_while_graph``): a graph holding one conditional node of type WHILE
(``cuGraphConditionalHandleCreate`` with a default of 1, ``cuGraphAddNode`` with ``CU_GRAPH_COND_TYPE_WHILE``, CUDA
12.4+) whose body graph, captured with ``cuStreamBeginCaptureToGraph``, is the sweep and ``jacobi_check_graph``.
That kernel computes the same decision as the baseline's check and hands it to ``cudaGraphSetConditional``: the
graph runs the body again while it is 1. One ``cuGraphLaunch`` per call on torch's current stream; no read-back,
no per-sweep launch from the host. The sweep alternates its buffers by the parity of the count it reads on the
device, since a graph's kernel arguments are fixed.

Expected (predicted): close to the sweeps' device time plus the graph's per-iteration scheduling (a few µs),
3-6x faster than the host-driven loop.

Timed with the wall clock. Work: as the baseline; the same sweeps stop at the same count, the outputs agree bit
for bit.
"""

from chapters.ch12.cuda_kernels import GraphLoop


def get_benchmark() -> GraphLoop:
    return GraphLoop()
