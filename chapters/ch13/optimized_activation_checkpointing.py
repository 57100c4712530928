"""The same step with each block under ``torch.utils.checkpoint``: a block saves its input only, and runs its
forward again in the backward to rebuild what its backward reads.

The one idea: trade compute for memory. Saved per block: its input h (8 x 2048 x 1024 fp32, 64 MiB) instead
of ~0.6 GB; at the peak one block's activations are rebuilt at a time. ``use_reentrant=False``: the
non-reentrant implementation (PyTorch's recommendation), which supports keyword arguments and does not need an
input that requires grad.

Predicted on an H100 or H200 (not measured): peak ~2.5 GB (weights, gradients, momentum) + 16 x 64 MiB
(block inputs) + one block's ~0.6 GB + the logits ~0.8 GB: ~5 GB, ~2.5x less than the baseline; the step
~30 % slower (a block's forward is ~1/3 of its forward + backward, run twice). Outputs: the loss and the
updates, equal to the baseline's (the recomputed forward replays the same kernels). Clock: wall.
"""

from chapters.ch13.memory import Activations


def get_benchmark() -> Activations:
    return Activations("checkpoint")
