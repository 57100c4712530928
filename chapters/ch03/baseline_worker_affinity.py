"""DataLoader workers and the main process's intra-op threads all floating over all cores.

The main process projects each batch (a matmul on torch's default thread count: every core) while its
DataLoader workers decode the next batches on the same cores. With 4 workers busy, the main process's
16-thread team runs on 16 cores shared with 4 other busy processes: its parallel regions wait at their
barriers for members the scheduler has preempted, and workers and team members migrate across cores
(and, on a two-socket host, across NUMA nodes, away from the memory they allocated and from the GPU).

Expected on the H100 host (16 usable cores): ~1.2-1.5x slower than partitioned, host-dependent; a pair
about contention, so its figure is the host's, not the GPU's.

Work per call (both sides): one epoch of 32 batches (common.Pipeline). Timed with the wall clock.
"""

from chapters.ch03.common import Pipeline


def get_benchmark() -> Pipeline:
    return Pipeline(partitioned=False)
