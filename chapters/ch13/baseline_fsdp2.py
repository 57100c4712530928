"""Data-parallel training with every rank holding the whole model: DistributedDataParallel, two ranks.

The step (chapters/ch13/sharded.py): 16 pre-norm MLP blocks (d 2048, ff 8192) and a final LayerNorm, 537 M fp32
parameters (2.15 GB), AdamW (fused), each rank its own 256 tokens; one step per call from the set-up state.
DDP keeps the gradients in buckets (``gradient_as_bucket_view``: ``.grad`` is a view of its bucket) and
all-reduces each bucket as backward fills it.

Predicted per rank on the H200 x 2 host (not measured): held through the call, 24 bytes a parameter: weights,
gradients, exp_avg, exp_avg_sq (2.15 GB each), the snapshot and update buffers (2.15 GB each): 12.9 GB; the saved
activations, 256 tokens x (2 d + 2 ff) x 4 bytes a block, 21 MB x 16 = 0.34 GB, at the backward's start: a peak
of ~13.2 GB (~12,600 MiB), the same on both ranks. Step (rates measured on the H200s, docs/results/h200.md and
h200x2.md: fp32 matmul 51 TFLOP/s without TF32, copy 4.2 TB/s, chapter 4's 256 MiB all-reduce 262 GB/s): forward
and backward 825 GFLOP a rank, ~16 ms; the all-reduce of 2.15 GB, ~8 ms, mostly beside the backward's ~11 ms;
fused AdamW 28 bytes a parameter (15 GB, ~3.6 ms); the reset, zeroing and update ~4 ms: ~24-26 ms.
Measured (H200 x 2, docs/results/h200.md, call 17): a call's peak 12,756 MiB on each rank, the step 39.4 ms.

Clock: the wall clock on every rank, the slowest rank's. Verdict: peak memory (the max over the ranks' per-call
peaks).
"""

from chapters.ch13.sharded import DataParallelStep


def get_benchmark() -> DataParallelStep:
    return DataParallelStep(sharded=False)
