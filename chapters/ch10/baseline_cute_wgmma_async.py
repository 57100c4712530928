"""CuTe DSL fp16 GEMM, four TMA stages, each wgmma batch drained before the next K-slice is awaited.

wgmma is asynchronous: ``commit_group`` hands the batch (four 64 x 256 x 16 multiplies per warpgroup) to the
tensor cores and returns. Here every K step ends with ``wait_group(0)``: the warpgroup idles until its batch
is done, then waits on the next buffer's mbarrier and issues again, so the tensor cores see a gap between
batches (the wait, the fence and the issue of the next batch).

Predicted (not measured): 10-30 % under the kernel that keeps one batch in flight, on an H200.

Work: 2 x 8192³ flops; A, B read once and C written once at least (384 MiB).
"""

from chapters.ch10.cute_config import Config
from chapters.ch10.cute_gemm import CuteGemm


def get_benchmark() -> CuteGemm:
    return CuteGemm(Config(tile_mn=(128, 256), stages=4, mmas_in_flight=0))
