"""The same 4 serving threads, each with cores / 4 intra-op threads: one compute thread per core.

The one idea: size the intra-op teams so that all of them together match the cores this process may
use (os.sched_getaffinity, not os.cpu_count: a container's or a job's share). torch.set_num_threads in
each serving thread sets its own team (OpenMP's thread count is per calling thread). Each request gets
fewer threads, but no thread ever waits for a core, regions end without waiting for a preempted
member, and caches stay with their threads: the requests together finish sooner.

Expected on the H100 host: 16 threads on 16 cores, ~1.3-2x faster than the baseline; the ceiling is the
cores' fp32 matmul rate (`perflab peak` measures a CPU's only on a CPU run).

Work per call: as the baseline (common.Requests). Timed with the wall clock.
"""

from chapters.ch03.common import Requests


def get_benchmark() -> Requests:
    return Requests(lambda cores, threads: max(1, cores // threads))
