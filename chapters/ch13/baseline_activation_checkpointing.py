"""A long-context training step whose saved activations dwarf its weights: autograd keeps every block's.

The model (chapters/ch13/memory.py, ``Activations``): vocab 8192, d 1024, 16 heads, 16 layers, ff 4096, one step
of 8 x 2048 tokens under bf16 autocast, SGD with momentum. Held at the peak (start of the backward): ~2.5 GB of
fp32 weights, gradients and momentum, and every block's saved tensors (LayerNorm inputs, the QKV and attention
outputs, the MLP's ff-wide hidden state before and after GELU: ~36 bytes per token and model dimension in bf16
and fp32, ~0.6 GB per block, ~9.5 GB for 16) plus the logits (8 x 2048 x 8192: 0.27 GB in bf16, 0.54 GB in fp32
for the loss).

Predicted on an H100 or H200 (not measured): a peak of ~12-13 GB. The pair's metric is that peak
(``peak_memory``, per call); the time is logged too. Clock: wall.
"""

from chapters.ch13.memory import Activations


def get_benchmark() -> Activations:
    return Activations("keep")
