"""A transformer MLP block's product on one GPU: ``Y = gelu(X @ W1) @ W2``, 8.8 TFLOP, while the other GPUs idle.

Rank 0 holds X (8192 tokens x 8192), W1 (8192 x 32768) and W2 (32768 x 8192) in bf16 and computes Y alone
(common.Mlp); the other ranks of the variant hold nothing and do nothing, so that both sides of the pair run on
the same ranks under the same clock (each sample the slowest rank's: rank 0's here).

Predicted on the H200 x 2 host (bf16 matmul measured at 739 TFLOP/s on the H200; assumed ~700 on these shapes):
2 x 2 x 8192 x 8192 x 32768 = 8.8 TFLOP ≈ 12.6 ms, + gelu over the 8192 x 32768 intermediate (537 MB read and
written at 4.2 TB/s ≈ 0.26 ms): ~12.8 ms per call, ~690 TFLOP/s, ~47 % of the two GPUs' peak it holds.

Clock: CUDA events on every rank, each sample the slowest rank's.
Work per call (both sides): 8.8 TFLOP.
"""

import torch

from chapters.ch04.common import Mlp


class OneGpu(Mlp):
    def prepare(self) -> None:
        x, w1, w2 = self.full()
        if self.rank == 0:
            self.x, self.w1, self.w2 = x, w1, w2
            self.out = torch.empty(x.shape[0], w2.shape[1], device=x.device, dtype=x.dtype)
        else:
            self.out = None  # no part of the answer here

    def benchmark_fn(self) -> None:
        if self.out is not None:
            h = torch.nn.functional.gelu(self.x @ self.w1, approximate="tanh")
            torch.matmul(h, self.w2, out=self.out)


def get_benchmark() -> OneGpu:
    return OneGpu()
