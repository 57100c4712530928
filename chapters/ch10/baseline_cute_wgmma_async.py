"""CuTe DSL fp16 GEMM on one warpgroup, four TMA stages, each wgmma batch drained before the next K-slice is awaited.

wgmma is asynchronous: ``commit_group`` hands the batch (eight 64 x 128 x 16 multiplies: two 64-row halves of the
128 x 128 tile times four 16-deep K blocks) to the tensor cores and returns. Here every K step ends with
``wait_group(0)``: the warpgroup idles until its batch is done, then releases the buffer, thread 0 issues the next
TMA copy, the warpgroup waits on the next buffer's mbarrier, fences and issues again. The tensor cores are idle
from the end of one batch to the start of the next, 128 times per tile.

Nothing else fills that gap: one warpgroup per CTA, and one CTA per SM (4 x 32 KiB of stages; two CTAs would need
256 KiB of the 227). With 128 x 256 tiles on two warpgroups the other warpgroup's batch runs while one
drains, and the H200 measured no difference (docs/results/h200.md, 2026-11-29 call 8).

Predicted 1.2-1.5x slower than the kernel that keeps one batch in flight (a batch is ~512 cycles of an SM's tensor
cores at their peak rate; the drain, the hand-over and the re-issue some 100-300); measured on an H200: 2.53 ms
against 2.02, 1.25x [1.23, 1.27] (docs/results/h200.md, 2026-11-29 call 13).

Work: 2 x 8192³ flops; A, B read once and C written once at least (384 MiB).
"""

from chapters.ch10.cute_config import Config
from chapters.ch10.cute_gemm import CuteGemm


def get_benchmark() -> CuteGemm:
    return CuteGemm(Config(tile_mn=(128, 128), stages=4, mmas_in_flight=0))
