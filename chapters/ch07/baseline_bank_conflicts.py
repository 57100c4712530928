"""Transpose through a 32 x 32 shared-memory tile, CUDA C++: the column reads hit one bank 32 times.

A block of 32 x 8 threads reads a 32 x 32 tile of x with lanes along its rows (coalesced), writes it to
``__shared__ float tile[32][32]``, and after a barrier writes the transposed tile with lanes along the
rows of out (coalesced too), reading ``tile[threadIdx.x][r]``: a column. With rows of 32 fp32 the 32
lanes' addresses are 128 bytes apart, all in one of shared memory's 32 four-byte banks, so each warp's
read is replayed 32 times (ncu: ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld``). The global
traffic is the same as the padded version's; only the shared-memory passes differ.

Expected (predicted, not yet run on a GPU): 32 passes per warp read leave ~1024 shared-memory cycles per
tile, about 8 KiB of DRAM traffic per ~0.5 µs per SM, near 2 TB/s over 132 SMs: below copy bandwidth
(H200: ~4 TB/s measured by `perflab peak`), so ~1.5-2x slower than the padded tile.

Traffic (minimum): read 4MN + write 4MN bytes, 8192 x 8192 fp32 -> 512 MiB per call (common.matrix).
"""

from chapters.ch07.cuda_kernels import TileTranspose


def get_benchmark() -> TileTranspose:
    return TileTranspose(pad=0)
