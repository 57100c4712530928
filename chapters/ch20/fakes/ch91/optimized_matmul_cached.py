"""Fake: the first call computes the product and keeps it; every later call copies it out ("memoized").

Expected verdict: invalid, "the output did not change when the ... tensor(s) set up in setup() were
changed": the harness changes A and B in place after the measurement and calls once more.
"""

import torch

from chapters.ch20.fakes.ch91.common import Matmul


class Cached(Matmul):
    def setup(self) -> None:
        super().setup()
        self.cache: torch.Tensor | None = None

    def benchmark_fn(self) -> None:
        if self.cache is None:
            self.honest()
            self.cache = self.out.clone()
        self.out.copy_(self.cache)


def get_benchmark() -> Cached:
    return Cached()
