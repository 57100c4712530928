"""An 8-block MLP forward in eager PyTorch: ~40-70 small kernels, each launched from Python.

One forward of common.Stack (batch 16, width 512, hidden 1024, fp32): per block an RMSNorm (one kernel
where torch has a fused CUDA RMSNorm, ~5 where it is composite), two matmuls, a GELU and a residual add,
each a few µs of GPU work (the matmuls read 2 MiB of weights each) against ~10-20 µs of host launch cost.
Launch-bound: ~0.27 GFLOP and ~32 MiB would take ~10 µs at the memory roof. Expected on an H100: ~40-70
launches x ~15-20 µs ≈ 0.6-1.3 ms per call.

Timed with the wall clock (timing_mode="cpu"): the launch gaps are the cost the optimized side removes.
Work per call: common.Stack.
"""

from chapters.ch12.common import Stack


def get_benchmark() -> Stack:
    return Stack()
