"""64 independent one-block kernels on one stream, CUDA C++: each waits for the one before.

Each task is one launch of ``fma_chain`` (cuda_kernels.CHAIN): a single block of 128 threads running a
dependent FMA chain of 200,000 steps, so it holds one SM for ~0.4 ms and leaves the other 131 idle. On one
stream the 64 kernels run in order: the call takes the sum of their times.

Expected (predicted, not yet run on a GPU): ~64 x the time of one kernel (its stated ceiling: the sum of the
64 kernels, each timed alone in setup).

Timed with the default cuda_event clock. Work per call (both sides): 64 x 128 threads x 200,000 steps x 2 flops.
"""

from chapters.ch11.cuda_kernels import Tasks


def get_benchmark() -> Tasks:
    return Tasks()
