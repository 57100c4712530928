"""The same fp32 GEMM through the library: ``torch.matmul`` (cuBLAS), TF32 off.

What a hand-written kernel is measured against: cuBLAS's fp32 SGEMM (no tensor cores: torch's default
``torch.backends.cuda.matmul.allow_tf32`` is False, left as it is, so the same fp32 arithmetic as the
hand-written kernels), with double-buffered shared tiles, tuned tile shapes and SASS-level scheduling.

Expected (predicted): 40-50 TFLOP/s on an H100 (the measured fp32 peak is 51.5), about 2x the tiled kernel.

Work: as the baseline (same inputs, same output; the harness compares them).
"""

import torch

from chapters.ch01.common import Example
from chapters.ch09.cuda_kernels import square_operands


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    torch.matmul(a, b, out=out)


def get_benchmark() -> Example:
    return Example(square_operands, launch)
