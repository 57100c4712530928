"""Cores partitioned: each worker pinned to a core of its own, the main process to the rest.

The one idea: give the two kinds of work disjoint cores of the GPU's NUMA node (sysfs: the node of the
GPU's PCI device; all usable cores on a single-node host or a CPU run). The workers (a quarter of the
cores) are pinned one per core by worker_init_fn; every thread of the main process is pinned to the
remaining cores, and its intra-op team sized to them. No thread waits for a core, nothing migrates, and
on a two-socket host the main process's memory (and the page-locked buffers it would stage batches in)
stays on the GPU's node.

Expected on the H100 host: ~1.2-1.5x faster than floating (host-dependent); the ceiling is the main
process's matmul rate on its 12 cores, as long as 4 workers keep up with it.

Work per call: as the baseline (common.Pipeline). Timed with the wall clock.
"""

from chapters.ch03.common import Pipeline


def get_benchmark() -> Pipeline:
    return Pipeline(partitioned=True)
