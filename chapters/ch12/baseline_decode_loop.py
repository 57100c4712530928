"""A decode loop launched eagerly: 16 steps of ~25-45 small kernels each, every kernel launched from Python.

Each step (common.Decode) embeds the current tokens, runs 4 residual MLP blocks, the final norm, the head
matmul and an argmax that writes the next tokens, which the next step reads: the steps are sequential, and
each kernel is a few µs of GPU work (batch 8: the matmuls read 2-8 MiB of L2-resident weights) while the
host needs ~10-20 µs to launch it. The GPU waits for the host between kernels: the call is launch-bound,
and neither roof of the roofline applies (~1.4 GFLOP and ~34 MiB per call would take ~30 µs at the fp32
rate). Expected on an H100 (chapter 1 measured ~21 µs per eager kernel in a similar chain): 16 x ~35 x
~15-20 µs ≈ 8-11 ms per call.

Timed with the wall clock (timing_mode="cpu"): the launch gaps are the cost the optimized side removes.
Work per call: common.Decode.
"""

from chapters.ch12.common import Decode


def get_benchmark() -> Decode:
    return Decode()
