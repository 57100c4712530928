"""Chapter 13's two-rank pair: one AdamW training step of a data-parallel model whose every rank holds all of it
(DistributedDataParallel), against FSDP2 (``torch.distributed.fsdp.fully_shard``), whose ranks hold 1/n each.

The model: ``layers`` pre-norm MLP blocks (LayerNorm, Linear(d, ff), GELU, Linear(ff, d), the input added back)
and a final LayerNorm, fp32 throughout (no autocast: AdamW's state and the gradients stay fp32, as the
parameters). Each rank trains on its own micro-batch (``tokens`` x d inputs and targets drawn from seed + 1000 x
rank, chapters/ch04/common.py's rule), the loss the mean squared error; the weights are the same on every rank
and on both sides (each parameter drawn whole from seed + its index, a sharded side keeping its shard).

**A call is one step from the set-up state** (chapters/ch13/common.py's rule for a training step): parameters
copied back from a snapshot, AdamW's state zeroed (a fresh optimizer's), gradients zeroed, forward, backward,
``opt.step()``, and the update (parameters after less the snapshot) written into buffers of the parameters'
shapes. Snapshot and update are the harness's (4 bytes a parameter each, as each side holds its parameters: whole
or a shard); they count in both sides' peaks. The output is every parameter's update as a full tensor, the
same on every rank: the replicated side's buffers themselves, the sharded side's gathered
(``DTensor.full_tensor()``) in ``get_output()``, outside the timed call, since holding every rank's update whole
is the memory the pair removes (the harness's NaN poison cannot reach a sharded side's shards through the gathered
copies). Updates, not weights: a side that skipped the step would keep weights within a few per cent of the
initial ones, and an update of zero.

**What differs is where state lives.** Replicated, each rank holds per parameter 4 bytes of weight, 4 of gradient
(DDP's buckets; ``gradient_as_bucket_view``: the gradients are views of them, no second copy), 8 of AdamW state
(exp_avg, exp_avg_sq), and the snapshot's and update's 8: 24 bytes. Sharded, each rank holds 1/n of each
(``reshard_after_forward=True``, FSDP2's default: a block's parameters are all-gathered before its forward, freed
after it, gathered again for its backward, its gradients reduce-scattered), plus the unsharded parameters of the
block at work and of the one prefetched, and a block's unsharded gradients before their reduce-scatter.
Activations are the same on both sides (``tokens`` x (2 d + 2 ff) x 4 bytes a block: inputs, LayerNorm output,
hidden before and after GELU).

**Clock: the wall clock** (``timing_mode="cpu"`` on every rank, the devices synchronized, the slowest rank's):
a step's time until the next can begin. The pair's verdict is peak memory (``speedup_metric``: ``peak_memory``,
each rank's CUDA ``max_memory_allocated`` over a call, the variant's the max over its ranks:
bench.measure.memory); the time is reported beside it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from bench import BenchmarkConfig, context
from chapters.ch04.common import SETUP_LIMIT_S, WORLD_SIZE, randn

LR = 1e-3
WEIGHT_DECAY = 0.01
# Both sides run the same matmuls on the same values; the gradients are summed over the ranks by an all-reduce on
# one side and a reduce-scatter on the other, for two ranks a + b either way (the sides' updates were equal on the
# CPU's gloo). A gradient that differs in its last bits moves a weight by at most one fp32 ulp, and a LayerNorm
# weight near 1.0 moves by ~1e-3 a step, so its update (after less before, in fp32) carries ~1e-4 of rounding on
# its own: against float64, 4.9e-5 (tests/chapters/test_ch13_fsdp2.py). A step skipped or made on one rank's
# gradient alone is off by O(1).
RTOL = 1e-3


class Block(nn.Module):
    """x + fc2(gelu(fc1(ln(x)))): 2 d ff + ff + 3 d parameters in six tensors."""

    def __init__(self, d: int, ff: int) -> None:
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Stack(nn.Module):
    """``layers`` blocks and a final LayerNorm (the root's own parameters, under the root's ``fully_shard``)."""

    def __init__(self, layers: int, d: int, ff: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, ff) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t``: a DTensor's local shard, a plain tensor itself."""
    return t.to_local() if isinstance(t, DTensor) else t


def init_weights(model: nn.Module, d: int) -> None:
    """Every parameter drawn whole, in parameter order, from seed + 100 + its index (weights N(0, 1/fan_in),
    biases N(0, 0.01²), LayerNorm weights 1 + N(0, 0.01²)); a sharded parameter keeps its own shard of the draw."""
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            fan_in = p.shape[1] if p.dim() == 2 else d
            full = randn(*p.shape, offset=100 + i, scale=fan_in**-0.5 if p.dim() == 2 else 0.01)
            if name.endswith("ln.weight") or name == "norm.weight":
                full.add_(1.0)
            if isinstance(p, DTensor):  # every rank drew the same tensor: each keeps its shard, no communication
                full = distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None)
            p.copy_(full)


class DataParallelStep:
    """One AdamW step per call on every rank's own micro-batch. ``sharded`` False: DDP, every rank the whole model;
    True: ``fully_shard`` on each block and on the root."""

    full = (16, 2048, 8192, 256)  # layers, d, ff, tokens per rank
    smoke = (3, 21, 37, 13)  # lengths that are no multiple of anything: uneven shards on two ranks

    def __init__(self, sharded: bool) -> None:
        self.sharded = sharded

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(world_size=WORLD_SIZE, setup_timeout_seconds=SETUP_LIMIT_S, timing_mode="cpu",
                               rtol=RTOL)  # fmt: skip

    def speedup_metric(self) -> str:
        return "peak_memory"

    def setup(self) -> None:
        ctx = context()
        layers, d, ff, tokens = ctx.size(self.full, self.smoke)
        ctx.record("model", f"{layers} blocks, d {d}, ff {ff}, fp32")
        ctx.record("tokens_per_rank", tokens)
        with torch.device("meta"):
            model = Stack(layers, d, ff)
        if self.sharded:  # on the meta device: each rank allocates only its shards (to_empty below)
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
            for block in model.blocks:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
        model.to_empty(device=ctx.device)
        init_weights(model, d)
        self.model = model
        self.net: nn.Module = model
        if not self.sharded:
            from torch.nn.parallel import DistributedDataParallel

            self.net = DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.is_cuda else None,
                                               gradient_as_bucket_view=True)  # fmt: skip
        self.params = list(model.parameters())
        ctx.record("parameters", sum(p.numel() for p in self.params))
        ctx.record("layout", "fully_shard per block and root" if self.sharded else "DDP, replicated")
        # fused: one kernel over p, g, exp_avg, exp_avg_sq, no temporaries the size of the state (foreach's sqrt)
        self.opt = torch.optim.AdamW(self.params, lr=LR, weight_decay=WEIGHT_DECAY, fused=True)
        self.x = randn(tokens, d, offset=1, per_rank=True)
        self.y = randn(tokens, d, offset=2, per_rank=True)
        self.initial = [p.detach().clone() for p in self.params]
        self.update = [torch.empty_like(p) for p in self.params]
        self.flops = 6 * tokens * sum(p.numel() for p in model.parameters() if p.dim() == 2) * ctx.world_size
        # The first step makes AdamW's state (zeroed at each call's start from then on): every call does the same.
        self.benchmark_fn()

    def benchmark_fn(self) -> None:
        with torch.no_grad():
            torch._foreach_copy_([local(p) for p in self.params], [local(t) for t in self.initial])
            state = [local(t) for s in self.opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
            if state:
                torch._foreach_zero_(state)
        # DDP's gradients are views of its buckets: zeroed in place (None would make autograd allocate new ones).
        # FSDP2 frees its sharded gradients and makes them anew in the reduce-scatter.
        self.opt.zero_grad(set_to_none=self.sharded)
        loss = F.mse_loss(self.net(self.x), self.y)
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            mine = [local(u) for u in self.update]
            torch._foreach_copy_(mine, [local(p) for p in self.params])
            torch._foreach_sub_(mine, [local(t) for t in self.initial])

    def get_output(self) -> list[torch.Tensor]:
        return [u.full_tensor() if isinstance(u, DTensor) else u for u in self.update]

    def get_inputs(self) -> dict[str, Any]:
        # what a call reads; the parameters, gradients and AdamW state are scratch each call overwrites first
        return {"x": self.x, "y": self.y, "initial": [local(t) for t in self.initial]}

    def get_work(self) -> dict[str, float]:
        return {"flops": float(self.flops)}  # forward 2, backward 4 per token and weight, every rank's

    def teardown(self) -> None:
        sharded = self.sharded
        vars(self).clear()  # the model, its optimizer, the snapshot: a set-up again starts from nothing
        self.sharded = sharded
