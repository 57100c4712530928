"""The same product split over the GPUs, Megatron-style: W1 by columns, W2 by rows, one all-reduce.

The one idea: each rank owns 1/n of the hidden units. With W1 split by columns, rank r computes its own slice
of ``gelu(X @ W1)`` — gelu is elementwise, so no rank needs another's slice; with W2 split by the matching rows,
rank r's ``H_r @ W2_r`` is its share of every element of Y, and one all-reduce sums the shares (Y on every
rank). Each GPU does 1/n of the FLOPs; the price is one all-reduce of Y (8192 x 8192 bf16, 134 MB), and the
shards' sums in bf16 (a few 1e-3 of relative error against the one-GPU product: within bf16's tolerance).

Predicted on the H200 x 2 host (the baseline's ~700 TFLOP/s; ~360 GB/s per direction through NCCL): 12.8 ms /
2 = 6.4 ms of matmul and gelu per GPU, + all-reduce 134 MB x 2(n-1)/n / 360 GB/s ≈ 0.37 ms: ~6.8 ms, ~1.9x;
~1.3 PFLOP/s, ~88 % of the two GPUs' peak. The ceiling is n x: the all-reduce (2(n-1)/n x 134 MB over the link)
and smaller matmuls per GPU keep it below.

Clock: as the baseline. Work per call: as the baseline (common.Mlp).
"""

import torch
import torch.distributed as dist

from chapters.ch04.common import Mlp, shard


class ColumnRow(Mlp):
    def prepare(self) -> None:
        x, w1, w2 = self.full()
        self.x = x
        self.w1 = shard(w1, 1, self.rank, self.world)  # this rank's hidden units: columns of W1
        self.w2 = shard(w2, 0, self.rank, self.world)  # and the matching rows of W2
        self.out = torch.empty(x.shape[0], w2.shape[1], device=x.device, dtype=x.dtype)

    def benchmark_fn(self) -> None:
        h = torch.nn.functional.gelu(self.x @ self.w1, approximate="tanh")  # no communication: column split
        torch.matmul(h, self.w2, out=self.out)  # this rank's share of every element of Y: row split
        dist.all_reduce(self.out)  # the shares summed, on every rank

    def get_output(self) -> torch.Tensor | None:
        return self.out if self.rank == 0 else None  # every rank holds Y; rank 0's is the pair's answer


def get_benchmark() -> ColumnRow:
    return ColumnRow()
