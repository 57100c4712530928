"""64 matrix-vector products, one at a time: the weight crosses DRAM once per vector.

out[b] = W @ x_b for 64 bf16 vectors x_b and one bf16 weight W [N, K] filling 4x L2 (10240 x 10240,
200 MiB on an H100), as a server answers requests one by one: ``torch.mv`` per vector, 64 cuBLAS
calls per call. Each product reads all of W for 2NK flops, 1 FLOP per byte, and W is 4x the L2, so
nothing of it survives from one product to the next: 64 x 200 MiB = 13.4 GB of DRAM traffic per call.
Each product (~70-90 µs of GPU time) is far longer than its launch, so the GPU never waits on the
host and the default CUDA-event clock times the device's work.

Predicted (not measured): bandwidth-bound at 64x the minimum traffic: ~4.5-6 ms per call on an H100
(~40 GB/s of useful bytes, ~1.5 % of copy bandwidth), 40-65x slower than the batched product.

Work (minimum): read W and the vectors once, write the outputs: 2(NK + BK + BN) bytes = 212 MB;
2BNK = 13.4 GFLOP: intensity 63 FLOP/B, left of the bf16 ridge point (~250 FLOP/B).
"""

import torch

from chapters.ch09.common import Example, weight_and_vectors


def launch(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    for b in range(x.shape[0]):
        torch.mv(w, x[b], out=out[b])  # reads all of W


def get_benchmark() -> Example:
    return Example(weight_and_vectors, launch)
