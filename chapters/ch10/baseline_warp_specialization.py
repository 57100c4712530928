"""A 9-point stencil streamed through shared memory in CUDA C++, every warp doing every job in turn.

``stencil_single_role`` (cuda_kernels.STENCIL): one persistent block of 256 threads per SM walks its tiles of
2048 outputs. Per tile all threads issue the 16-byte ``cp.async`` copies of the tile and its halo (8 KiB + 32 B),
wait for them, meet at ``__syncthreads()``, compute the stencil from shared memory, and meet again before the next
tile's copies overwrite the buffer. Loads and math never overlap: each SM keeps one tile (8 KiB) in flight, then
none while it computes, far below the ~26 KiB per SM that HBM's latency-bandwidth product asks for.

Expected (predicted, not yet run on a GPU): latency-bound, roughly a third to a half of HBM bandwidth.

Work (both sides): 256 Mi fp32 read once and written once (2 GiB), 17 flops a point (cuda_kernels.signal); the
same persistent grid (one block per SM). Roofline: memory (8 bytes a point); the optimized side is to reach the
usual share of the measured copy bandwidth.
"""

from chapters.ch10.cuda_kernels import stencil


def get_benchmark():
    return stencil("stencil_single_role")
