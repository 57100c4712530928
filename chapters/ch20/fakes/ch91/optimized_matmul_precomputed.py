"""Fake: the product computed in setup(); the timed calls do nothing. "1000x faster".

Expected verdict: invalid, "output still holds the NaN poison": the harness fills the output with NaN
before the timed calls, and nothing overwrote it.
"""

from chapters.ch20.fakes.ch91.common import Matmul


class Precomputed(Matmul):
    def setup(self) -> None:
        super().setup()
        self.honest()

    def benchmark_fn(self) -> None:
        pass


def get_benchmark() -> Precomputed:
    return Precomputed()
