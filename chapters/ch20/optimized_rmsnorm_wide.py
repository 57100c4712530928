"""The same RMSNorm with the launch a search found: rows per program x columns per step x warps.

The one idea: the search tries what a programmer would only guess: the whole row in one pass on 4-16
warps, or 1024/4096 columns at a time in two passes (the second read mostly from L2), with 1-16 rows per
program: 24 candidates for a 16384-wide row, compiled and timed in set-up (recorded as in
``matmul_search``). On 16 warps the whole row takes 59 registers a thread (sm_90 build): the same two
programs per SM, but 32 warps to issue loads and stores instead of 8; a two-pass tile of 4096 columns on
4 warps takes 48 registers, ten programs per SM.

Predicted on an H100 (not measured): ~85-90 % of the copy bandwidth, ~150-160 µs: ~1.2-1.5x the default
(a heuristic like Liger-Kernel's, which picks 16 warps for rows of 8192-32767, exists because the default
loses here; by how much only the GPU run will say). Search cost: 24 small compilations (~0.3-0.5 s each)
and their timings. Outputs: the same arithmetic per element, the sums of squares in another order: within
bf16's rtol.

Clock and work: as the baseline.
"""

from chapters.ch20.common import WIDE_ROWS, Example, TunedNorm, rows_problem, search_config


def get_benchmark() -> Example:
    tuned = TunedNorm()
    return Example(rows_problem(WIDE_ROWS), tuned.launch, tuned.prepare, search_config())
