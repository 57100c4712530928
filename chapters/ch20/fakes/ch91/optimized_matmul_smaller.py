"""Fake: a smaller problem. Half of K, doubled ("the second half of the sum is like the first"): half the
work, the same output shape, the declared work unchanged.

Expected verdict: ok but not verified, "relative error ~1 exceeds rtol" (the halves of a sum of random
products are independent). On a GPU, if the claimed rate passed the measured matmul peak, it would also
be invalid ("faster than the hardware").
"""

import torch

from chapters.ch20.fakes.ch91.common import Matmul


class Smaller(Matmul):
    def benchmark_fn(self) -> None:
        a, b = self.operands
        half = a.shape[1] // 2
        torch.mm(a[:, :half], b[:half], out=self.out)
        self.out.mul_(2.0)


def get_benchmark() -> Smaller:
    return Smaller()
