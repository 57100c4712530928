"""The same matmul with the tile and K split a search found: 20 candidates, split 1-16 ways.

The one idea: let the search see the shape. Four tiles (64-128 x 64-128) times K split 1, 2, 4, 8 or 16
ways: with K split s ways there are 64·s programs (for 128 x 128 tiles), each summing 1/s of K and adding
its partial tile into C with fp32 atomics (C zeroed first: 4 MiB, ~3 µs, inside the timed call). The
search (in set-up, recorded as in ``matmul_search``) weighs more programs against more partial-sum
traffic (s x 4 MiB of atomics) on this device.

Predicted on an H100 (not measured): split 2-4 (128-256 programs, 1-2 waves) at ~500-600 TFLOP/s:
~0.23-0.28 ms, ~1.7-2x the baseline; ceiling ~2x (132 / 64 SMs busy). The sums of each output add in
another order (s partial sums, atomics in arbitrary order): ~2e-6 relative apart, declared as rtol 1e-4
for this fp32 output (a lost split would be 25-50 %). Search cost: ~20 candidates x ~1 s to compile.

Clock and work: as the baseline.
"""

from bench import BenchmarkConfig
from chapters.ch20.common import SPLITK_DEFAULT, SPLITK_RTOL, SPLITK_SPACE, Example, TunedMatmul, tall_k_matmul


def get_benchmark() -> Example:
    tuned = TunedMatmul(SPLITK_SPACE, SPLITK_DEFAULT, zero=True)
    config = BenchmarkConfig(setup_timeout_seconds=600.0, rtol=SPLITK_RTOL)
    return Example(tall_k_matmul, tuned.launch, tuned.prepare, config)
