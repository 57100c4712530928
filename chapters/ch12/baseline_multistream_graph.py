"""An MoE layer's 8 expert MLPs captured in one CUDA graph from one stream: 24 small kernels in a chain.

common.Experts: each expert multiplies its 1-32 tokens by a 512 x 1024 and a 1024 x 512 weight (4 MiB per
expert) with a GELU between. Captured from one stream, the graph records each kernel as depending on the
one before, so the GPU runs them one at a time although the experts are independent: each matmul, a few
dozen rows wide, fills a handful of thread blocks and spends most of its ~4-6 µs on latency, with
~100 of the H100's 132 SMs idle. Expected on an H100: ~8 x (2 x ~5 µs + ~2 µs) ≈ 90-100 µs per replay.

Timed with the default cuda_event clock: both sides launch one graph per call; what differs is the
device time inside it. Work per call: 32 MiB of weights, 4 x tokens x 512 x 1024 FLOPs (common.Experts).
"""

from chapters.ch12.common import Experts


def get_benchmark() -> Experts:
    return Experts()
