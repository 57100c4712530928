"""A model split into two stages on two GPUs, the naive way: stage 1 runs the whole batch, then hands it on.

The 16-layer MLP (d=4096, bf16, common.Pipeline) is cut in half: layers 1-8 on one GPU, 9-16 on the other
(model parallelism: each GPU holds half the weights). The whole batch of 16 384 tokens goes through the first
stage, its activations (16 384 x 4096 bf16, 134 MB) cross the link in one message, then the second stage runs.
At any moment one GPU computes and the other waits: with n stages each GPU is idle (n-1)/n of the time.

Predicted on the H200 x 2 host (bf16 matmul ~700 TFLOP/s on these shapes, 739 measured for 8192³; NCCL ~360
GB/s per direction): 2 x 16 384 x 4096² x 8 = 4.4 TFLOP per stage ≈ 6.3 ms, the hand-over 134 MB ≈ 0.37 ms,
the second stage 6.3 ms: ~13 ms per call, ~680 TFLOP/s: ~46 % of the two GPUs' peak it holds.

Clock: CUDA events on every rank, each sample the slowest rank's. Needs two GPUs (skipped with the reason on
one); on a CPU, two gloo ranks at smoke size.
Work per call (both sides): 8.8 TFLOP of forward matmuls (common.Pipeline).
"""

from chapters.ch04.common import Pipeline


def get_benchmark() -> Pipeline:
    return Pipeline(micro=1)
