"""An embedding-like table in unified (managed) memory, CUDA C++, no placement advice: pages chase the last toucher.

A 256 MiB table (1 Mi rows of 64 fp32) in a ``cuMemAllocManaged`` buffer (cuda_kernels.Placement). Each call the CPU
rewrites 4096 rows, then ``gather_rows`` (cuda_kernels.GATHER) reads 64 Ki random rows on the GPU. Without advice a
page lives where it was last touched: the gather's faults pull the pages it reads to the GPU (a 256-byte row brings
at least its 4 KiB page, most of the table after the first call), and the CPU's next writes fault their pages back
to the host, one fault at a time, before the GPU faults them over again.

Expected (predicted, not yet run on a GPU): tens of ms per call, dominated by page faults on both sides.

Timed with the wall clock (the CPU's writes are part of the call). Work per call (both sides): the rows written and
the rows gathered, 256 bytes each. Stated ceiling (cuda_kernels.Placement.ceiling): the CPU's writes into ordinary
memory plus the gathered bytes copied from pinned memory, timed in setup; the target is a quarter of it.
"""

from chapters.ch06.cuda_kernels import Placement


def get_benchmark() -> Placement:
    return Placement(placed=False)
