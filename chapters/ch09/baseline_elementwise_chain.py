"""GELU (tanh form) as eight PyTorch ops: every intermediate goes to DRAM and comes back.

out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x³))) written as a user writes it without a
fused activation: x.pow(3), a multiply, an add, a multiply, tanh, 0.5 * x, 1 + t, and the final
multiply, eight kernels on x filling 4x L2 (200 MB, 50 M fp32 on an H100). Each reads one or two
full-size tensors and writes one: 72 bytes per element cross DRAM (two reads + a write for the
two binary ops, a read + a write for the six others) for 10 flops, an arithmetic intensity of
0.14 FLOP/B, far left of the fp32 ridge point (~17 FLOP/B).

Predicted (not measured): bandwidth-bound at 72 B per element, ~1.2 ms per call on an H100
(3.6 GB at ~3 TB/s), 7-9x slower than the fused kernel.

Work (minimum): read x, write out, 8 B per element (400 MB); 10 flops per element (0.5 GFLOP):
intensity 1.25 FLOP/B.
"""

import torch

from chapters.ch09.common import GELU_C, GELU_K, Example, gelu_vector


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    inner = x + GELU_K * x.pow(3)  # 3 kernels
    t = torch.tanh(GELU_C * inner)  # 2 kernels
    torch.mul(0.5 * x, 1 + t, out=out)  # 3 kernels


def get_benchmark() -> Example:
    return Example(gelu_vector, launch)
