"""The same QK-norm with the launch the same search finds for 128-wide rows.

The one idea, and the chapter's point about shape: the search space is ``rmsnorm_wide``'s, the kernel
too, but for rows of 128 it should pick the opposite corner: many rows per program (8-32: 2-8 KiB in
per program, 4-32 values per thread) on few warps, where the wide rows want one row on many warps. One
default cannot serve both; a search keyed by the shape (``key=["M", "N"]``) serves each. 27 candidates.

Predicted on an H100 (not measured): ~80-90 % of the copy bandwidth, ~150-165 µs, ~2-3.5x the default.
Outputs: the same arithmetic per row; within bf16's rtol.

Clock and work: as the baseline.
"""

from chapters.ch20.common import HEAD_ROWS, Example, TunedNorm, rows_problem, search_config


def get_benchmark() -> Example:
    tuned = TunedNorm()
    return Example(rows_problem(HEAD_ROWS), tuned.launch, tuned.prepare, search_config())
