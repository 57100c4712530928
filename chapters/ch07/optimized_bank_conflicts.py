"""The same transpose with the tile's rows padded to 33 fp32: a column spans all 32 banks.

The one change: ``tile[32][33]`` instead of ``tile[32][32]`` (compiled with ``-DPAD=1``). Element
(r, c) sits at word 33r + c, so the 32 lanes reading column c touch words 33r + c for r = 0..31: bank
(r + c) mod 32, one lane per bank, one pass per warp read instead of 32. The tile grows by 128 bytes
(4224 B of shared memory per block, recorded with the run as ``size.cuda.transpose_tile.shared_bytes``).

Expected (predicted): near copy bandwidth, as the Triton tiled transpose (H100: 2.98 TB/s, 99.5 % of
copy); 1.5-2x faster than the unpadded tile.

Traffic (minimum): as the baseline, 512 MiB per call.
"""

from chapters.ch07.cuda_kernels import TileTranspose


def get_benchmark() -> TileTranspose:
    return TileTranspose(pad=1)
