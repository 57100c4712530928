"""The same requests padded to 4 bucket sizes (8, 16, 32, 64 rows), one CUDA graph per bucket.

The one idea: make dynamic shapes static by padding. Setup captures the model once per bucket on a static
input buffer of that many rows (common.Graph). A request of n rows copies its rows into the smallest
bucket that holds it, replays that bucket's graph and copies its n output rows out: 3 launches instead of
~30. The rows past n hold whatever earlier requests left there; rows are independent in this model
(RMSNorm and matmuls act per row), so they change none of the request's own outputs. The price is the
padding's extra rows (at most 2x; ~1.3x on average here), which at these sizes costs the GPU almost
nothing: each matmul's time is set by its weights, not by 8 vs 16 rows.

What it should buy on an H100: per request, the kernels' own time (~30 x ~3 µs) plus ~30-40 µs for the
three launches, ≈ 0.1-0.13 ms instead of ~0.5 ms: about 4x over the call. On a CPU run there are no graphs:
each padded bucket runs eagerly (the padding and slicing are still exercised): same output, no speedup.

Timed with the wall clock, as the baseline. Work per call: as the baseline, the useful rows only
(common.Requests).
"""

from functools import partial

import torch

from bench import context
from chapters.ch12.common import Graph, Requests, bucket_for


class Bucketed(Requests):
    def capture(self) -> None:
        ctx = context()
        self.buckets = ctx.size((8, 16, 32, 64), (4, 9))
        width = self.x.shape[1]
        self.static_in = {b: torch.zeros(b, width, device=ctx.device) for b in self.buckets}
        self.static_out = {b: torch.empty(b, width, device=ctx.device) for b in self.buckets}
        self.graphs = {b: Graph(partial(self.padded, b)) for b in self.buckets}

    def padded(self, bucket: int) -> None:
        """The model on bucket ``bucket``'s static input, into its static output (what the graph captures)."""
        self.static_out[bucket].copy_(self.model(self.static_in[bucket]))

    def run(self, start: int, stop: int) -> None:
        n = stop - start
        b = bucket_for(n, self.buckets)
        self.static_in[b][:n].copy_(self.x[start:stop])
        self.graphs[b]()
        self.out[start:stop].copy_(self.static_out[b][:n])


def get_benchmark() -> Bucketed:
    return Bucketed()
