"""CuTe DSL fp16 GEMM (TMA + wgmma, cute_gemm.py), one shared-memory stage: copy, wait, multiply, wait, each K step.

C = A @ Bᵀ at 8192³ with 128 x 256 x 64 CTA tiles on two consumer warpgroups. With a single buffer, thread 0
cannot issue the TMA copy of K-slice i + 1 before every warpgroup has finished reading slice i, and the
wgmma batch is drained (``wait_group(0)``) before the buffer is released: the copy's DRAM/L2 latency and the
tensor cores' run alternate instead of overlapping, 128 times per tile.

Predicted (not measured): about half the tensor cores' rate on an H200 (several hundred ns of copy latency
against ~1 µs of wgmma per K step); the 4-stage ring 1.5-2x faster.

Work (both sides): 2 x 8192³ flops; A, B read once and C written once at least (384 MiB).
"""

from chapters.ch10.cute_config import Config
from chapters.ch10.cute_gemm import CuteGemm


def get_benchmark() -> CuteGemm:
    return CuteGemm(Config(tile_mn=(128, 256), stages=1, mmas_in_flight=0))
