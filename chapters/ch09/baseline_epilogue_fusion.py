"""gelu(x @ W + b) with the bias and the activation as separate passes over the product.

An FFN up-projection: x [16384, 2048] @ W [2048, 4096] in bf16 (fp32 accumulation), + b, then the
exact (erf) GELU. The matmul is chapter 8's Triton kernel (128 x 128 tiles, 8 warps, 3 stages)
storing the bf16 product C; then ``C.add_(b)`` and ``gelu_`` each read and write all of C
(128 MiB): 512 MiB more DRAM traffic per call than the product itself, ~0.17 ms at ~3 TB/s, and two
more launches, against ~0.45 ms of tensor-core work. C is rounded to bf16 three times.

Predicted (not measured): 1.3-1.45x slower than the fused version on an H100.

Work (minimum): read x, W, b once, write out once: 2(MK + KN + MN + N) bytes = 208 MiB; 2MNK =
275 GFLOP: intensity ~1260 FLOP/B, right of the bf16 ridge point (~265 FLOP/B): compute-bound as a
whole, and yet the unfused passes are pure bandwidth.
"""

import torch

from chapters.ch09.common import Example, ffn_up, matmul

product = matmul(block=(128, 128, 64), num_warps=8, num_stages=3)


def launch(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    product(x, w, out)
    out.add_(b)  # read C, write C
    torch.ops.aten.gelu_(out)  # read C, write C


def get_benchmark() -> Example:
    return Example(ffn_up, launch)
