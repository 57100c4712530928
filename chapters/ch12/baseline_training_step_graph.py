"""A training loop launched eagerly: 8 steps of an MLP's forward, loss, backward and Adam, ~45 small kernels each.

Each step (common.Training) copies its batch into the input buffers, runs the MLP's forward (4 ``addmm`` of 32
rows, 3 GELUs), the mean-squared error, the backward (autograd: two matmuls, a bias sum and a GELU backward per
layer) and Adam's step (``foreach=True, capturable=True``: ~17 multi-tensor ops over the 8 parameter tensors,
the bias corrections among them), and records the loss. Every kernel is a few µs of GPU work (the weights, 3 MiB,
and the optimizer's state stay in L2), while the host needs ~10-20 µs to launch each, more where autograd's
engine and Adam's Python run between them: the GPU waits for the host, and the call is launch-bound (~1.2
GFLOP per call would take ~25 µs at the fp32 rate).

Expected on an H100 (chapter 12's decode_loop: ~9 µs per eager kernel on its host; a backward and an
optimizer cost more per kernel): ~45 x ~12-18 µs ≈ 0.55-0.8 ms per step, ≈ 4.5-6.5 ms per call.

Timed with the wall clock (timing_mode="cpu"): the launch gaps are the cost the optimized side removes.
Work per call: common.Training.
"""

from chapters.ch12.common import Training


def get_benchmark() -> Training:
    return Training()
