"""SiLU over 250 MiB with CUDA's habitual launch: 256 threads per block, one element per thread.

out = x / (1 + exp(-x)), one program per 256 elements on 8 warps: a million tiny programs, each thread
issuing one 4-byte load and one 4-byte store before it exits. Accesses are coalesced, so no byte is
wasted; what is short is bytes in flight (an H100 needs ~latency x bandwidth ~ 2 MB of loads outstanding)
and what is long is the block scheduler's queue.
Expected on an H100: like chapter 7's one-element-per-thread copy (measured there: 1.76x slower than 8
elements per thread, 1.68 TB/s): ~1.6-1.8x slower than tuned, ~55-65 % of the copy bandwidth.

Work per call (both sides): read 4N + write 4N bytes, N = 5x L2 / 4 (62.5 Mi fp32 on an H100); 4 flops per
element (common.silu_problem).
"""

from chapters.ch06.common import BASE_BLOCK, BASE_WARPS, Example, silu_launch, silu_problem


def get_benchmark() -> Example:
    return Example(silu_problem, silu_launch(BASE_BLOCK, BASE_WARPS))
