"""The same kernel with the configuration a search found: Triton's autotuner over 24 candidates.

The one idea: do not pick the tile, measure. The space is every tile of 64-256 x 64-256 (six shapes), K
steps of 32 or 64, 3 or 4 pipeline stages, and the warps the tile's accumulator needs (4 up to 64 x 128,
else 8): 24 configurations, the hand default among them, pruned to those that fit sm_90's shared memory
and registers (all 24 do at 8192³). In set-up each is compiled, then timed by ``triton.testing.do_bench``
on these operands, and the fastest is kept; the timed calls only launch it. Recorded beside the result:
``search_s`` (compile and timing), ``search_compile_s``, ``configs_timed``, the ``config`` chosen, the
search's own timing of the default and of the winner (``search_gain``) and ``break_even_calls``.

Predicted on an H100 (not measured): the search lands on a 128 x 256 or 256 x 128 tile with 64-wide K steps
(85 FLOP per byte from L2, chapter 9), ~550-650 TFLOP/s: ~1.7-2.1 ms, ~1.5-2x the default. Its cost: ~1 s
of compiling per candidate on a fresh host (~25-35 s, mostly ptxas; Triton's on-disk cache makes a
second process's compile near free) plus ~0.15 s of timing each; at ~1 ms saved per call, ~30,000 calls
to break even: minutes of a training run, never a benchmark's few hundred. Same kernel body and K order per
step; outputs agree within bf16's rtol (K steps of 32 vs 64 round their fp32 sums in another order).

Clock and work: as the baseline.
"""

from chapters.ch20.common import MATMUL_DEFAULT, MATMUL_SPACE, Example, TunedMatmul, search_config, square_matmul


def get_benchmark() -> Example:
    tuned = TunedMatmul(MATMUL_SPACE, MATMUL_DEFAULT, zero=False)
    return Example(square_matmul, tuned.launch, tuned.prepare, search_config())
