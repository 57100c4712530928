"""4 serving threads, each running its matmuls on torch's default intra-op thread count: all the cores.

A CPU inference service handles requests on several Python threads (the matmuls release the GIL). Each
of those threads is an OpenMP master with a team as large as the machine, so 4 threads on 16 cores put
64 compute threads on 16 cores. Every parallel region ends at a barrier, and a team member the scheduler
has preempted for another team's thread holds the whole region up for a scheduling slice; threads
migrate and evict each other's cache. Nothing is wrong in any one thread: the sum oversubscribes.

Expected on the H100 host (16 usable cores): 64 threads on 16 cores; a few tens of ms per call, ~1.3-2x
slower than right-sized (host-dependent; on the 2-core CI machine, 2 x 2 threads on 2 cores measured
~1.6x slower than 2 x 1 for elementwise ops).

Work per call (both sides): 64 requests x 64 x (1024 -> 1024 -> 256): 10.7 GFLOP (common.Requests).
Timed with the wall clock.
"""

from chapters.ch03.common import Requests


def get_benchmark() -> Requests:
    return Requests(lambda cores, threads: cores)  # torch's default, as every thread would inherit it
