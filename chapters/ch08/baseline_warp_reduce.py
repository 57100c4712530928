"""Row sums, CUDA C++, the block's 256 partial sums combined by a shared-memory tree.

One block of 256 threads per row of 1024 fp32; each thread adds 4 elements (coalesced), then the block
halves its partial sums 8 times in shared memory with a ``__syncthreads()`` after each step: 8 barriers
and 8 shared round trips, most with idle lanes (the last 5 steps use under one warp but every warp
waits at the barrier). With only 4 loads per thread, that tail is a large part of the block's time.

Expected (predicted, not yet run on a GPU): memory-bound at full size, but each SM's blocks spend part of
their life in the tree instead of keeping loads in flight: below copy bandwidth by 10-30 %.

Work (both sides): 512 MiB read per call, 128 Ki sums written (cuda_kernels.short_rows).
"""

from chapters.ch08.cuda_kernels import row_sums


def get_benchmark():
    return row_sums("row_sums_tree")
