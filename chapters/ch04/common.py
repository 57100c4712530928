"""What every chapter-4 variant shares: the ranks, their seeded inputs, the shell, the problems and their work.

Ranks. Every variant here declares ``world_size`` (``WORLD_SIZE``): the harness runs it as that many processes
joined by ``torch.distributed`` (rank r on cuda:r with NCCL; on a CPU, gloo processes at smoke size), calls every
method on every rank in step, and takes each sample from the slowest rank (a collective is over when its last
rank is). Both sides of a pair run on the same ranks with the same clock, even the one-GPU baseline of
``tensor_parallel`` (its other ranks idle): a speedup is never taken between two clocks. The code holds for any
number of ranks; the bus factors and shards below are written for n. A host with fewer GPUs skips the pair, with
the reason.

Inputs. The harness seeds every rank alike; a tensor that must differ between ranks (a rank's gradients, its
batch) draws from ``seed + offset + 1000 * rank``, one that must be the same everywhere (weights) from ``seed +
offset``: both sides of a pair draw the same values, in the same place.

Work. ``get_work()`` gives each collective's payload per rank (``comm_bytes``: nccl-tests' "size") and its bus
factor, so the harness reports algorithm and bus bandwidth (``algbw_gbps``, ``busbw_gbps``): busbw = algbw x
2(n-1)/n for an all-reduce is the bandwidth each rank's link carries, comparable with the peer bandwidth (H200 x 2
over NVLink: ~450 GB/s per direction, nominal) whatever n. Matmul-bound pairs declare FLOPs (all ranks'), which
the harness holds against n GPUs' measured peak.

Smoke sizes keep a CPU run to a few milliseconds per call, with lengths that are no multiple of anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from bench import BenchmarkConfig, context

WORLD_SIZE = 2  # ranks of every variant here (the H200 x 2 host); a cli_layer's world_size (run_suite) outranks it
# A rank's start (a fresh interpreter importing torch, ~6 s on the H100 host, then NCCL's communicator) counts
# in the set-up stage: twice its default limit.
SETUP_LIMIT_S = 60.0


def ranks_config(**fields: Any) -> BenchmarkConfig:
    """The config every variant here returns: ``WORLD_SIZE`` ranks, set-up's limit for their start."""
    return BenchmarkConfig(world_size=WORLD_SIZE, setup_timeout_seconds=SETUP_LIMIT_S, **fields)


def all_reduce_factor(n: int) -> float:
    """NCCL's bus factor of an all-reduce among ``n`` ranks: each rank's link carries 2(n-1)/n of the payload."""
    return 2 * (n - 1) / n


def generator(offset: int, per_rank: bool) -> torch.Generator:
    """A generator on the rank's device seeded with the run's seed + ``offset`` (+ 1000 x rank if ``per_rank``)."""
    ctx = context()
    return torch.Generator(device=ctx.device).manual_seed(ctx.seed + offset + (1000 * ctx.rank if per_rank else 0))


def randn(*shape: int, offset: int, per_rank: bool = False, dtype: torch.dtype = torch.float32,
          scale: float = 1.0) -> torch.Tensor:  # fmt: skip
    """Fresh N(0, scale^2) values on the rank's device, drawn in fp32 and cast to ``dtype``."""
    x = torch.randn(*shape, generator=generator(offset, per_rank), device=context().device)
    return (x.mul_(scale) if scale != 1.0 else x).to(dtype)


def compute_dtype() -> torch.dtype:
    """bf16 on GPUs (tensor cores); fp32 on a CPU, where gloo and the matmuls are slow or partial in bf16."""
    return torch.bfloat16 if context().is_cuda else torch.float32


class Ranked:
    """A variant's shell: ``prepare()`` allocates on every rank, then one untimed call (a collective: every rank
    makes it) leaves each scratch buffer holding what every call leaves there, so the harness's watch over the
    tensors set up in ``setup()`` sees no change from the timed calls. Outputs are NaN-poisoned before the timed
    calls, which rewrite them."""

    out: Any  # a tensor, a tuple of them, or None on a rank that holds no part of the answer
    work: dict[str, float]

    def get_config(self) -> BenchmarkConfig:
        return ranks_config()

    def prepare(self) -> None:
        raise NotImplementedError

    def setup(self) -> None:
        self.prepare()
        self.benchmark_fn()

    def benchmark_fn(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        vars(self).clear()  # every tensor and module prepare() made; the process group is the harness's

    def get_output(self) -> Any:
        return self.out

    def get_work(self) -> dict[str, float]:
        return self.work


# --- allreduce ------------------------------------------------------------------------------------


class AllReduce(Ranked):
    """allreduce: each rank holds a different fp32 vector ``x`` (256 MiB at full size); every rank ends with the
    elementwise sum of all ranks' vectors in ``out``. ``x`` is never written: a call starts from it."""

    def prepare(self) -> None:
        ctx = context()
        n = ctx.size(full=1 << 26, smoke=3001)
        self.x = randn(ctx.record("elements", n), offset=0, per_rank=True)
        self.out = torch.empty_like(self.x)
        self.rank, self.world = ctx.rank, ctx.world_size
        self.work = {"comm_bytes": n * 4, "bus_factor": all_reduce_factor(ctx.world_size)}


# --- grad_buckets ---------------------------------------------------------------------------------


def gradient_shapes(layers: int, d: int) -> list[tuple[int, ...]]:
    """The gradients of a GPT-style stack, in parameter order: per layer two LayerNorms (weight, bias), the fused
    qkv projection, the output projection and the 4x MLP (weights and biases): 12 tensors a layer."""
    per_layer = [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return per_layer * layers


def plan_buckets(numels: Sequence[int], cap: int) -> list[list[int]]:
    """Consecutive tensors (indices) grouped into buckets of at most ``cap`` elements, a tensor never split; one
    larger than ``cap`` gets a bucket of its own (DDP's rule, ``bucket_cap_mb``)."""
    buckets: list[list[int]] = []
    size = 0
    for i, numel in enumerate(numels):
        if buckets and size + numel <= cap:
            buckets[-1].append(i)
            size += numel
        else:
            buckets.append([i])
            size = numel
    return buckets


class Gradients(Ranked):
    """grad_buckets: the gradients a backward pass left on each rank (``fresh``: 288 fp32 tensors of a 24-layer,
    d=512 stack, 75.7M values, 303 MB at full size), averaged over the ranks into ``grads``, tensor by tensor.

    All-reduce works in place, so every call starts by copying ``fresh`` (what backward wrote) into the buffers
    it reduces: the baseline into ``grads`` themselves, the bucketed side into its buckets."""

    def prepare(self) -> None:
        ctx = context()
        layers, d = ctx.size(full=(24, 512), smoke=(3, 20))
        shapes = gradient_shapes(ctx.record("layers", layers), ctx.record("d", d))
        self.fresh = [randn(*s, offset=i, per_rank=True, scale=1e-3) for i, s in enumerate(shapes)]
        self.grads = [torch.empty_like(g) for g in self.fresh]
        self.out = tuple(self.grads)
        self.world = ctx.world_size
        numel = sum(g.numel() for g in self.fresh)
        ctx.record("tensors", len(shapes))
        self.work = {"comm_bytes": numel * 4, "bus_factor": all_reduce_factor(ctx.world_size)}

    def get_inputs(self) -> list[torch.Tensor]:
        # the gradients backward wrote; a bucketed side also holds views of them, which must not be changed twice
        return self.fresh


# --- ddp_overlap ----------------------------------------------------------------------------------


def mlp(layers: int, d: int) -> torch.nn.Sequential:
    """``layers`` x (Linear(d, d), GELU) on the rank's device in the compute dtype, the same weights on every rank
    (weights N(0, 1/d), biases N(0, 0.01²), from the seeded generators)."""
    blocks: list[torch.nn.Module] = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(d, d, device="meta"), torch.nn.GELU()]
    model = torch.nn.Sequential(*blocks).to_empty(device=context().device).to(compute_dtype())
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(randn(*p.shape, offset=100 + i, scale=d**-0.5 if p.dim() == 2 else 0.01))
    return model


class Training(Ranked):
    """ddp_overlap: one data-parallel step without the optimizer: forward and backward of an 8-layer MLP (d=4096,
    bf16, 268 MB of gradients) on each rank's own 1024 tokens, then the gradients averaged over the ranks. The
    output is every parameter's averaged gradient; zeroing them (set_to_none=False, as the step's start) is in
    the call on both sides."""

    def prepare(self) -> None:
        ctx = context()
        layers, d, tokens = ctx.size(full=(8, 4096, 1024), smoke=(3, 36, 29))
        self.model = mlp(ctx.record("layers", layers), ctx.record("d", d))
        self.x = randn(ctx.record("tokens", tokens), d, offset=1, per_rank=True, dtype=compute_dtype())
        self.world = ctx.world_size
        params = sum(p.numel() for p in self.model.parameters())
        itemsize = torch.finfo(compute_dtype()).bits // 8
        # forward 2·T·d²·L, backward twice that (inputs' and weights' gradients), on every rank
        self.work = {"flops": 6 * tokens * d * d * layers * ctx.world_size, "comm_bytes": params * itemsize,
                     "bus_factor": all_reduce_factor(ctx.world_size)}  # fmt: skip

    def loss(self, model: torch.nn.Module) -> torch.Tensor:
        return model(self.x).float().square().mean()

    def get_output(self) -> tuple[torch.Tensor, ...]:
        return tuple(p.grad for p in self.model.parameters() if p.grad is not None)


# --- tensor_parallel ------------------------------------------------------------------------------


class Mlp(Ranked):
    """tensor_parallel: a transformer MLP block's product ``Y = gelu(X @ W1) @ W2`` (X: 8192 tokens x 8192, W1:
    8192 x 32768, W2: 32768 x 8192, bf16: 8.8 TFLOP) on rank 0's answer. Every rank draws the full X, W1 and W2
    alike (``full()``); the sides keep what they use of them."""

    def full(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ctx = context()
        tokens, d = ctx.size(full=(8192, 8192), smoke=(37, 24))
        h = 4 * d
        ctx.record("tokens", tokens)
        ctx.record("d", d)
        dtype = compute_dtype()
        self.work = {"flops": 2 * 2 * tokens * d * h}  # two matmuls of tokens x d x h
        self.rank, self.world = ctx.rank, ctx.world_size
        return (randn(tokens, d, offset=0, dtype=dtype), randn(d, h, offset=1, dtype=dtype, scale=d**-0.5),
                randn(h, d, offset=2, dtype=dtype, scale=h**-0.5))  # fmt: skip


def shard(t: torch.Tensor, dim: int, rank: int, world: int) -> torch.Tensor:
    """Rank ``rank``'s contiguous slice of ``t`` along ``dim`` (``world`` near-equal parts), as its own tensor."""
    return torch.tensor_split(t, world, dim=dim)[rank].contiguous()


# --- pipeline_parallel ----------------------------------------------------------------------------


class Pipeline(Ranked):
    """pipeline_parallel: the forward pass of a 16-layer MLP (Linear(d, d) + GELU, d=4096, bf16) on 16 384 tokens,
    its layers split into ``world`` consecutive stages, one per rank (GPipe's layout), the batch in ``micro``
    micro-batches. Stage s runs on rank world-1-s, so the last stage, which holds the answer, is rank 0 (the rank
    whose output the harness compares); rank world-1 holds the input. Every rank draws the full model alike
    (``mlp``) and keeps its own stage's layers. The sides differ only in ``micro``: 1 is the naive split (each
    stage runs the whole batch, then hands it on), more lets stage s work on micro-batch m while stage s+1 works
    on m-1.

    Activations cross with point-to-point ``send``/``recv`` (NCCL on GPUs, gloo on a CPU); a stage posts all
    its receives first and waits for each only before that micro-batch's layers, and sends each micro-batch as
    soon as it is computed (``isend``), so the link carries m while the stage computes m+1."""

    def __init__(self, micro: int) -> None:
        self.micro = micro

    def prepare(self) -> None:
        ctx = context()
        layers, d, tokens = ctx.size(full=(16, 4096, 16384), smoke=(5, 24, 37))
        self.rank, self.world = ctx.rank, ctx.world_size
        model = mlp(ctx.record("layers", layers), ctx.record("d", d))
        stage = self.world - 1 - self.rank
        blocks = list(model)  # Linear, GELU, Linear, GELU, ...: a stage's layers are whole (Linear, GELU) pairs
        bounds = torch.tensor_split(torch.arange(layers), self.world)[stage]
        self.stage = torch.nn.Sequential(*blocks[2 * int(bounds[0]) : 2 * (int(bounds[-1]) + 1)])
        self.first, self.last = stage == 0, stage == self.world - 1
        x = randn(ctx.record("tokens", tokens), d, offset=1, dtype=compute_dtype())
        self.x = x if self.first else None
        ctx.record("micro_batches", self.micro)
        self.chunks = [c.numel() for c in torch.tensor_split(torch.arange(tokens), self.micro)]  # rows per micro-batch
        # receive buffers of the micro-batches (every stage but the first), the answer (the last stage)
        self.inbox = None if self.first else [torch.empty(n, d, device=x.device, dtype=x.dtype) for n in self.chunks]
        self.out = torch.empty_like(x) if self.last else None
        self.work = {"flops": 2 * tokens * d * d * layers}  # forward only, every stage together

    @torch.no_grad()
    def benchmark_fn(self) -> None:
        prev, nxt = self.rank + 1, self.rank - 1  # stage s on rank world-1-s: activations flow to lower ranks
        pending = [] if self.first else [dist.irecv(buf, src=prev) for buf in self.inbox]
        sends = []
        rows = self.x.split(self.chunks) if self.first else self.inbox
        outs = self.out.split(self.chunks) if self.last else None
        for m, x in enumerate(rows):
            if pending:
                pending[m].wait()  # on a GPU the compute stream waits for the receive, the host does not
            y = self.stage(x)
            if self.last:
                outs[m].copy_(y)
            else:
                sends.append(dist.isend(y, dst=nxt))  # y stays alive in the send until wait()
        for s in sends:
            s.wait()

    def get_output(self) -> torch.Tensor | None:
        return self.out  # the last stage's (rank 0's); the other ranks hold no part of the answer
