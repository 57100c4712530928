"""An MoE layer's 8 expert MLPs captured in one CUDA graph from one stream: ~40 small kernels in a chain.

common.Experts: each expert multiplies its 1-32 tokens by a 512 x 1024 and a 1024 x 512 weight (4 MiB per
expert) with a GELU between. Captured from one stream, the graph records each kernel as depending on the
one before, so the GPU runs them one at a time although the experts are independent: each matmul, a few
dozen rows wide, fills a handful of thread blocks (cuBLAS splits K: an sgemm of 32-256 blocks and a
reduction) and spends most of its ~4-7 µs on latency, with most of the H100's 132 SMs idle. Expected on an
H100: 8 chains of ~20 µs each (scripts/timing/experts_probe.py measures each alone), ~150-170 µs per replay.

Timed with the default cuda_event clock: both sides launch one graph per call; what differs is the
device time inside it. Work per call: 32 MiB of weights, 4 x tokens x 512 x 1024 FLOPs (common.Experts).
"""

from chapters.ch12.common import Experts


def get_benchmark() -> Experts:
    return Experts()
