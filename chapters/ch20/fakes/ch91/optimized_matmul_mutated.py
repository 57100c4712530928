"""Fake: inputs mutated. The first call writes the product into A's own buffer (A is square, and "dead after
the matmul") and later calls copy A out: the timed calls run on what the first one left behind.

Expected verdict: not verified, "not once the inputs were changed": the harness sees the timed calls change
A, sets the benchmark up again (a call from the set-up state computes the product afresh, so it matches and
takes as long as a call on what was left), then changes A and B in place; this fake copies out its stale
"product", which no longer matches the baseline's on the same change.
"""

from chapters.ch20.fakes.ch91.common import Matmul


class Mutated(Matmul):
    def setup(self) -> None:
        super().setup()
        self.product_in_a = False

    def benchmark_fn(self) -> None:
        a = self.operands[0]
        if not self.product_in_a:
            self.honest()
            a.copy_(self.out)
            self.product_in_a = True
        self.out.copy_(a)


def get_benchmark() -> Mutated:
    return Mutated()
