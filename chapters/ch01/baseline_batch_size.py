"""Small batches: the same Linear layer applied 8 samples at a time, 256 GEMMs per call.

out[r] = x[r] @ W^T + b for each block r of 8 rows, written in place (``torch.addmm(..., out=)``).
Every GEMM streams the whole weight (128 MiB, more than twice L2) from DRAM to use it for only 8
rows: 2 * 8 FLOPs per 4 bytes of W, an arithmetic intensity of ~4 FLOP/B, far left of the fp32
ridge point (~17 FLOP/B on an H100), so the call is memory-bound at 256 x 128 MiB = 32 GiB of
weight traffic. Expected on an H100: ~11.5 ms (32 GiB at ~3 TB/s).

Work per call (minimum, both sides): 2048 x 4096 in, 4096 -> 8192 features; read x, W, b and write
out = 224 MiB; 137 GFLOP (common.linear_layer).
"""

import torch

from chapters.ch01.common import Example, linear_layer

SMALL_BATCH = 8


def launch(x: torch.Tensor, wt: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    for xs, outs in zip(x.split(SMALL_BATCH), out.split(SMALL_BATCH), strict=True):
        torch.addmm(b, xs, wt, out=outs)  # row blocks of out are contiguous: written in place


def get_benchmark() -> Example:
    return Example(linear_layer, launch)
