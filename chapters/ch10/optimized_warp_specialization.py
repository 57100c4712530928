"""The same stencil with warp specialization: a producer warp copies, eight consumer warps compute.

The one idea (``stencil_warp_specialized``, cuda_kernels.STENCIL): the block gains a ninth warp whose only job is
the ``cp.async`` copies, into a ring of 4 shared-memory spans (32 KiB), while warps 0-7 only compute. The roles hand
each span over with named barriers and thread counts (``bar.arrive`` / ``bar.sync id, 288``): the producer arrives at
FULL[s] once a tile has landed (``cp.async.wait_group 3``: up to 4 tiles in flight), the consumers wait there, compute,
and arrive at EMPTY[s], where the producer waits before refilling span s. No block-wide barrier: copying and
computing proceed side by side, and each SM keeps 3-4 tiles (24-32 KiB) in flight instead of one.

Expected (predicted): near the copy bandwidth, 1.5-2.5x faster than the single-role loop. A multistage pipeline
without specialization (every warp issuing tile k + 3's copies before computing tile k, as chapter 10's Triton
``software_pipelining`` does) buys the same overlap; specialization also frees the consumers from address math and
waits, which is what Hopper's GEMMs (producer warps issuing TMA, consumers issuing wgmma) build on.

Work: as the baseline; same tiles per block in the same order, same expression per point: the outputs are equal.
"""

from chapters.ch10.cuda_kernels import stencil


def get_benchmark():
    return stencil("stencil_warp_specialized")
