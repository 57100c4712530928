"""The same 256 steps in one kernel: each row held by a cluster of 8 blocks in distributed shared memory.

The one idea (``heat_cluster``, cuda_kernels.HEAT): a thread-block cluster (``__cluster_dims__(8, 1, 1)``,
Hopper) spreads a row over 8 SMs' shared memory, 16 KiB of it double-buffered per block, and its blocks
can meet: after each step the cluster waits at ``__cluster_barrier_arrive/wait`` instead of a kernel
boundary, and a block reads its neighbours' edge points straight from their shared memory
(``__cluster_map_shared_rank``). The row crosses global memory twice per call instead of twice per step.

Expected (predicted): ~1 µs per step (the cluster barrier and 16 shared-memory points per thread), 2-5x
faster than a launch per step.

Work: as the baseline. Needs compute capability 9.0 (clusters).
"""

from chapters.ch01.common import CudaExample
from chapters.ch10.cuda_kernels import HEAT, cluster_launch, heat_rows


def get_benchmark() -> CudaExample:
    return CudaExample(HEAT, "heat_cluster", heat_rows, cluster_launch)
