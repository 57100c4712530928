"""The same histogram in a thread-block cluster's distributed shared memory (Hopper, sm_90).

The one idea (``histogram_cluster``, cuda_kernels.HISTOGRAM): a cluster of 4 blocks, declared with
``__cluster_dims__(4, 1, 1)`` and scheduled together on one GPU processing cluster, holds one private
copy of the histogram split over its 4 blocks' shared memory (32 KiB each; block r owns the bins b with
b % 4 == r, so the hot head of the law is spread over the cluster's 4 SMs). Each element's add goes to the
owning block's shared memory through ``__cluster_map_shared_rank`` (local for a quarter of the bins, over the
SM-to-SM network for the rest); cluster barriers (``__cluster_barrier_arrive/wait``) order the zeroing, the adds
and the final flush, in which each block adds its part to the global counts once per bin. The adds to a hot bin
are spread over 132 private copies instead of meeting in one L2 line, and L2 atomics drop from one per element
(256 Mi) to one per bin per cluster (132 clusters x 32 Ki).

Expected (predicted, not measured): several times faster on these values. On uniform values (the pair's first
form, 2026-11-29 call 2) the adds hardly contend and the H200 measured 1.09x: privatisation pays for contention.

Work: as the baseline. Needs compute capability 9.0 (clusters); the kernel's resources are recorded with the
run (``size.cuda.histogram_cluster.*``).
"""

from chapters.ch10.cuda_kernels import histogram


def get_benchmark():
    return histogram("histogram_cluster")
