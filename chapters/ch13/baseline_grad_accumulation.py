"""Gradient accumulation written as a summed loss: ``total = total + loss / 4`` over 4 micro-batches, then one
``total.backward()``. The sum carries every micro-batch's autograd graph, so every saved activation of all four
forwards is held until that backward: the peak is that of one 8 x 2048-token batch, the very memory accumulation
was meant to save.

The model (chapters/ch13/memory.py, ``GradAccumulation``): ``Activations``' LM (vocab 8192, d 1024, 16 layers,
ff 4096, 205 M parameters), micro-batches of 2 x 2048 tokens, bf16 autocast, SGD with momentum. Held at the peak
(the start of the backward): ~2.5 GB of fp32 weights, gradients and momentum, ~36 bytes per token and model
dimension per block of saved tensors (~0.6 GB per block for 16,384 tokens, ~9.5 GB for 16 blocks) and the four
micro-batches' logits (2 x 2048 x 8192 each, bf16 and the fp32 copy for the loss: ~0.2 GB each).

Predicted on an H100 or H200 (not measured for this pair): the peak of ``activation_checkpointing``'s baseline,
which holds the same model's activations for the same 16,384 tokens at once and read 15,867 MiB on the H200 (run
``a3417877``): ~15-16 GB (``peak_memory``, per call); the time is logged too. On a GPU the set-up records one
call's allocations and hands the snapshot to the harness (``files/memory_snapshot.pickle`` in the run): its
timeline climbs through four forwards before anything is freed. Clock: wall.
"""

from chapters.ch13.memory import GradAccumulation


def get_benchmark() -> GradAccumulation:
    return GradAccumulation(per_micro=False)
