"""The same step under ``torch.autograd.graph.save_on_cpu(pin_memory=True)``: every tensor autograd saves goes
to pinned host memory in the forward and comes back when the backward reads it.

The one idea: the device holds the weights, gradients, momentum and what is being computed; the saved
activations (~9.5 GB) wait on the host. The cost is the copies: ~9.5 GB each way over PCIe (H100/H200 hosts:
~50 GB/s pinned, one direction) ~0.2 s per direction, and the forward waits for them (save_on_cpu copies on
the compute stream): the step gets several times slower. That is the trade a model too large for its GPU makes
(FSDP's CPU offload does the same for parameters).

Predicted on an H100 or H200 (not measured): peak ~3.5 GB (weights, gradients, momentum, one block's working
set, the logits), ~3.5x less than the baseline. Outputs equal to the baseline's (copies move bits exactly).
Clock: wall.
"""

from chapters.ch13.memory import Activations


def get_benchmark() -> Activations:
    return Activations("offload")
