"""CuTe DSL fp16 GEMM with 64 x 128 CTA tiles: one warpgroup, each wgmma 64 x 128 x 16.

Four TMA stages of 24 KiB, one batch in flight, as the optimized side. A 64 x 128 tile does 2 x 64 x 128 x 64
flops per 24 KiB brought into shared memory: 43 FLOP per byte of L2-to-SM traffic (128 GiB of it for the whole
product) against 85 for 128 x 256; the smaller wgmma also gives the tensor cores less work per issued
instruction. Several CTAs share an SM (occupancy by shared memory), which hides some of it.

Predicted (not measured): 1.3-1.8x slower than the 128 x 256 tile on an H200.

Work: 2 x 8192³ flops; A, B read once and C written once at least (384 MiB).
"""

from chapters.ch10.cute_config import Config
from chapters.ch10.cute_gemm import CuteGemm


def get_benchmark() -> CuteGemm:
    return CuteGemm(Config(tile_mn=(64, 128), stages=4, mmas_in_flight=1))
