"""The same 32 products as one matrix product: W read once for all 32 vectors, intensity 32x higher.

The one idea, read off the roofline: a memory-bound call gets faster only with fewer bytes, so make each byte
of W serve all 32 vectors. ``Y = X @ W.T`` streams W once: 268 MB for the same 8.6 GFLOP, I ≈ 32 FLOP/B. That
is 32x further right, still left of the bf16 ridge (≈ 176 FLOP/B on an H200, 252 on an H100), so the call stays
memory-bound and its floor is 268 MB / 4.2 TB/s ≈ 64 µs (compute would need only 8.6 GFLOP / 739 TFLOP/s ≈
12 µs). Predicted: near the copy roof (target 80 % of the measured copy bandwidth), ~25-30x faster. Batching
more vectors would keep paying until I reaches the ridge (~176 vectors), after which the tensor cores bound it.

Outputs: the same bf16 products, accumulated in fp32 by another kernel (another order): within bf16's tolerance.
Work per call: as the baseline (common.gemv_batch).
"""

import torch

from chapters.ch01.common import Example, gemv_batch


def launch(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    torch.mm(x, w.t(), out=out)


def get_benchmark() -> Example:
    return Example(gemv_batch, launch)
