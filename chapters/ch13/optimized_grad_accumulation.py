"""The same step with ``(loss / 4).backward()`` after each micro-batch's forward: its graph and saved activations
are freed there, and the gradients add up in each parameter's ``.grad``.

The one idea: keep no tensor that carries autograd history past its backward (log ``loss.detach()`` or
``loss.item()``, never the loss itself). At the peak one micro-batch's activations are alive instead of four.

Predicted on an H100 or H200 (not measured): ~2.5 GB of weights, gradients and momentum + a quarter of the rest of
the baseline's ~15.9 GB peak (one micro-batch's saved tensors and logits, ~3.3 GB): ~5.5-6.5 GB against ~15-16 GB,
~2.4-2.9x less; the time about the same (the same kernels). Outputs: each micro-batch's loss and the update, as the
baseline's up to the order in which four fp32 gradient contributions are summed (bf16 autocast's tolerance on a
GPU, 1.6e-2: the pair's config says why). The set-up's memory snapshot (``files/memory_snapshot.pickle``, on a GPU)
shows the sawtooth: each forward's activations freed by its backward. Clock: wall.
"""

from chapters.ch13.memory import GradAccumulation


def get_benchmark() -> GradAccumulation:
    return GradAccumulation(per_micro=True)
