"""The same RMSNorm with the launch a search found: rows per program x columns per step x warps.

The one idea: the search tries what a programmer would only guess: the whole row in one pass on 4-16
warps, or 1024/4096 columns at a time in two passes (the second read from L2), with 1-16 rows per program.
~24 candidates for a 16384-wide row, compiled and timed in set-up (recorded as in ``matmul_search``).

Predicted on an H100 (not measured): 8-16 warps on the whole row (16-32 values per thread, 2-4x the
resident warps of the default) or a two-pass 4096-column tile: ~85-90 % of the copy bandwidth, ~100-115
µs, ~1.3-1.6x the default. Search cost: ~24 small compilations (~0.3-0.5 s each) and timings.
Outputs: the same arithmetic per element, the sums of squares in another order: within bf16's rtol.

Clock and work: as the baseline.
"""

from chapters.ch20.common import WIDE_ROWS, Example, TunedNorm, rows_problem, search_config


def get_benchmark() -> Example:
    tuned = TunedNorm()
    return Example(rows_problem(WIDE_ROWS), tuned.launch, tuned.prepare, search_config())
