"""One batched GEMM: ``torch.bmm`` over the stacked operands.

The one idea: give the GPU all 1024 products in one launch. A single batched kernel spreads the
products' tiles over every SM and pays one launch instead of 1024, so the call is limited by the
roofline again: 4.3 GFLOP and 192 MiB per call, ~0.09 ms at ~50 TFLOP/s fp32 or ~0.07 ms at
~3 TB/s (intensity 21 FLOP/B, just right of the ridge point). Expected on an H100: tens of times
faster than the loop. Same products; only cuBLAS's choice of kernel (summation order) may differ.

Work per call (minimum): as the baseline (common.matrix_batch).
"""

import torch

from chapters.ch01.common import Example, matrix_batch


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    torch.bmm(a, b, out=out)


def get_benchmark() -> Example:
    return Example(matrix_batch, launch)
