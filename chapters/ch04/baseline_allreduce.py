"""All-reduce done by one GPU: every rank's vector gathered to rank 0, summed there, the sum broadcast back.

Each rank holds its own 256 MiB fp32 vector (common.AllReduce) and every rank must end with the elementwise
sum of all of them. The naive way puts the work on one GPU: rank 0 receives the n-1 other vectors (NCCL's
gather: a send from each rank to rank 0), adds the n of them (reads n·S and writes S of its memory), then
broadcasts the sum (NCCL's broadcast: every link carries S once). Rank 0's links carry (n-1)·S in, then S out,
while the other GPUs wait; n-1 of the n GPUs never add anything.

Predicted on the H200 x 2 host (NVLink: ~450 GB/s per direction nominal; assumed: NCCL moves ~80 % of it,
~360 GB/s, and HBM copies at 4.2 TB/s as measured on the H200): gather 268 MB / 360 GB/s = 0.75 ms, sum
805 MB / 4.2 TB/s = 0.19 ms, broadcast 0.75 ms: ~1.7 ms per call, busbw (S / t x 2(n-1)/n) ~160 GB/s. With n
GPUs on an NVSwitch: (n-1)·S/B + (n+1)·S/HBM + S/B, linear in n.

Clock: CUDA events on every rank, each sample the slowest rank's (the harness's clock for several ranks).
Work per call (both sides): an all-reduce of 256 MiB per rank (comm_bytes; bus factor 2(n-1)/n).
"""

import torch
import torch.distributed as dist

from chapters.ch04.common import AllReduce


class GatherToOne(AllReduce):
    def prepare(self) -> None:
        super().prepare()
        # rank 0's landing rows for every rank's vector; other ranks gather nothing
        self.rows = torch.empty(self.world, *self.x.shape, device=self.x.device) if self.rank == 0 else None

    def benchmark_fn(self) -> None:
        if self.rows is not None:
            dist.gather(self.x, list(self.rows.unbind(0)), dst=0)
            torch.sum(self.rows, dim=0, out=self.out)
        else:
            dist.gather(self.x, None, dst=0)
        dist.broadcast(self.out, src=0)


def get_benchmark() -> GatherToOne:
    return GatherToOne()
