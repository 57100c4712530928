"""A Python loop of small GEMMs: 1024 independent 128 x 128 x 128 products, one kernel each.

out[i] = a[i] @ b[i] with ``torch.mm(..., out=out[i])``. Each product is 4 MFLOP: one kernel of a
few thread blocks, so an H100's 132 SMs are mostly idle while it runs, and each of the 1024
launches costs the host several microseconds of Python and driver work. Both limits are per
kernel, not per byte or FLOP: the loop runs at a small fraction of either roofline.
Expected on an H100: milliseconds per call, against ~0.1 ms for the batched kernel. Timed with
the default cuda_event clock, which queues the call behind a spin kernel so host launch gaps stay
out: the figure is the GPU's time for 1024 small kernels, a lower bound on the loop's wall time.

Work per call (minimum, both sides): read a, b and write out = 192 MiB; 4.3 GFLOP; intensity 21
FLOP/B, near the fp32 ridge point (common.matrix_batch).
"""

import torch

from chapters.ch01.common import Example, matrix_batch


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    for ai, bi, oi in zip(a, b, out, strict=True):
        torch.mm(ai, bi, out=oi)


def get_benchmark() -> Example:
    return Example(matrix_batch, launch)
