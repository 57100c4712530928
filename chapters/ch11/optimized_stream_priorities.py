"""The same chain on a stream of higher priority: its blocks take the next free SM slot.

The one change (cuda_kernels.Priorities, ``critical_priority = -1``): the chain's stream is created with
``torch.cuda.Stream(priority=-1)``. Running blocks are never preempted, but pending blocks of a higher-priority
stream are dispatched before the pending blocks of a lower one: each link of the chain starts as soon as one bulk
block retires (~1 µs on some SM at a wave's turn), runs beside the bulk's blocks (it needs a DRAM round trip per hop,
not the FMA pipes), and the chain finishes while the bulk is still running.

Expected (predicted): close to the bulk kernel alone, at the fp32 peak; 1.3-1.6x faster than the baseline.

Timed with the default cuda_event clock. Work: as the baseline; both streams compute the same outputs.
"""

from chapters.ch11.cuda_kernels import Priorities


class HighPriority(Priorities):
    critical_priority = -1


def get_benchmark() -> HighPriority:
    return HighPriority()
