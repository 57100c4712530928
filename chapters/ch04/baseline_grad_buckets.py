"""Gradients averaged over the ranks one tensor at a time: 288 all-reduces per step.

The gradients of a GPT-style stack (common.Gradients: 24 layers of 12 tensors, from 2 KB LayerNorm biases to
4 MB MLP weights; 303 MB in all) are all-reduced tensor by tensor, as a loop over ``model.parameters()``
would. Every NCCL call costs the same fixed latency whatever its size — a kernel launch, a handshake between
the ranks, a protocol chosen for a small message — on the order of 10 µs on NVLink, and a message of a few
MB moves at a fraction of the link's rate. 288 of them: the fixed cost is paid 288 times.

Predicted on the H200 x 2 host (assumed per call: ~12 µs of latency, MB-sized messages at ~60 % of ~360 GB/s):
288 x 12 µs ≈ 3.5 ms of latency + 303 MB / 215 GB/s ≈ 1.4 ms, plus the copy of what backward wrote and the
averaging (2 passes of 0.6 GB over 4.2 TB/s HBM, 0.3 ms): ~5 ms per call.

Clock: CUDA events on every rank, each sample the slowest rank's; the spin kernel hides the host's 288 launches
only as long as the device is slower than the host, so most of their host cost stays out of the sample.
Work per call (both sides): an all-reduce of 303 MB per rank (comm_bytes; bus factor 2(n-1)/n).
"""

import torch
import torch.distributed as dist

from chapters.ch04.common import Gradients


class PerTensor(Gradients):
    def benchmark_fn(self) -> None:
        torch._foreach_copy_(self.grads, self.fresh)  # what backward wrote (all-reduce works in place)
        for g in self.grads:
            dist.all_reduce(g)
        torch._foreach_mul_(self.grads, 1.0 / self.world)


def get_benchmark() -> PerTensor:
    return PerTensor()
