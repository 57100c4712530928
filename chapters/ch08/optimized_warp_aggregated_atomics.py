"""The same counts with warp-aggregated atomics: one add per distinct label in a warp.

The one change (``count_per_warp``, cuda_kernels.COUNT): the lanes of a warp holding the same label find
each other with ``__match_any_sync``, and the lowest of them adds ``__popc`` of the group: with 4 labels, at
most 4 atomics per 32 elements instead of 32, so the contended slice sees ~8x fewer operations. The loop
runs per warp (its 32 lanes step together), and ``__ballot_sync`` names the lanes that hold an element at
the tail. (A block-private count in shared memory would go further, as in ``atomic_reduction``; this pair
is about the warp-level primitive.)

Expected (predicted): several times faster, up to the DRAM rate of reading the labels.

Work: as the baseline.
"""

from chapters.ch08.cuda_kernels import count


def get_benchmark():
    return count("count_per_warp")
