"""A data-parallel step whose gradients are all-reduced after the backward pass: the link idles while the GPU
computes, then the GPU idles while the link works.

Each rank runs forward and backward of the same 8-layer MLP (d=4096, bf16) on its own 1024 tokens
(common.Training), its gradients written straight into one flat buffer (each parameter's ``.grad`` is a view of
it), then one all-reduce of the whole 268 MB buffer and a scale by 1/n average them. That all-reduce is the best
a single collective can do (one large message), but it starts only once the last gradient exists, and the
backward pass that produced them left the link idle.

Predicted on the H200 x 2 host (assumed: ~600 TFLOP/s for these 1024 x 4096 x 4096 bf16 matmuls, ~360 GB/s
per direction through NCCL, 4.2 TB/s HBM): forward 275 GFLOP ≈ 0.46 ms, backward 550 GFLOP ≈ 0.92 ms, zeroing
and scaling the gradients ≈ 0.2 ms, all-reduce 268 MB / 360 GB/s ≈ 0.75 ms: ~2.3 ms per step.

Clock: CUDA events on every rank, each sample the slowest rank's.
Work per call (both sides): 825 GFLOP of forward and backward on each rank (all ranks' declared: 1.65 TFLOP
at n = 2) and an all-reduce of 268 MB per rank (comm_bytes; bus factor 2(n-1)/n).
"""

import torch
import torch.distributed as dist

from chapters.ch04.common import Training


class AfterBackward(Training):
    def prepare(self) -> None:
        super().prepare()
        params = list(self.model.parameters())
        self.flat = torch.zeros(sum(p.numel() for p in params), device=params[0].device, dtype=params[0].dtype)
        for p, view in zip(params, self.flat.split([p.numel() for p in params]), strict=True):
            p.grad = view.view_as(p)  # backward accumulates into the view, in place

    def benchmark_fn(self) -> None:
        self.flat.zero_()
        self.loss(self.model).backward()
        dist.all_reduce(self.flat)
        self.flat.mul_(1.0 / self.world)


def get_benchmark() -> AfterBackward:
    return AfterBackward()
