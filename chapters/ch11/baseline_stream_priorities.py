"""A latency-critical chain of 32 small kernels beside a GPU-filling bulk kernel, both streams at one priority.

cuda_kernels.Priorities: ``fma_rows`` (cuda_kernels.PRIORITY), 330 Ki blocks of 128 threads (16 per SM, ~160
waves of ~17 µs on an H200) of FMA chains at the fp32 peak, on one side stream; then 32 launches of ``chase``, one
warp following random pointers through a 128 MiB table (64 dependent DRAM loads, ~50 µs each), each link starting
where the last one ended, on another. At equal priority the block scheduler hands freed SM slots to the bulk
kernel's pending blocks first: the chain's next link waits until the bulk has dispatched its last block, so the
chain runs after the bulk instead of beside it.

Expected (predicted, not yet run on a GPU): the bulk's time plus most of the chain's (~3.4 + ~1.7 ms).

Timed with the default cuda_event clock (both streams forked from and joined to the current one). Work per call
(both sides): the bulk's 2 x 2000 flops per thread (173 GFLOP) and its input and output; roofline: fp32 peak.
"""

from chapters.ch11.cuda_kernels import Priorities


def get_benchmark() -> Priorities:
    return Priorities()
