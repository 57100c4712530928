"""Chapter 13's memory pairs: a training step that holds less (activation checkpointing, activations offloaded
to the host, gradient accumulation that frees each micro-batch's graph) and an allocator that wastes less
(``expandable_segments``). Their benefit is memory, not time:
each declares ``speedup_metric()`` (bench.measure.memory), so the pair's ratio is the baseline's peak over the
optimized side's, read per call on a GPU; the time is still measured and logged, and is usually worse.

On a CPU the variants run at smoke size with the same outputs checked, but there is no peak to read (a
process's peak RSS cannot be reset): the pairs get no ratio there.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from bench import BenchmarkConfig, context
from chapters.ch13.common import LMTraining, bf16_autocast, generator

# --- activations: recompute or offload --------------------------------------------------------------------


class Activations(LMTraining):
    """A training step of a long-context LM whose saved activations dwarf its weights: vocab 8192, d 1024,
    16 heads, 16 layers, ff 4096, 8 rows of 2048 tokens, SGD with momentum, bf16 autocast (205 M parameters:
    ~2.5 GB of weights, gradients and momentum in fp32; ~0.6 GB of saved activations per block, ~9 GB in all).

    ``mode``: "keep" (autograd saves every block's activations), "checkpoint" (each block under
    ``torch.utils.checkpoint``: only its input is saved, the block's forward runs again in the backward) or
    "offload" (``torch.autograd.graph.save_on_cpu(pin_memory=True)``: every saved tensor copied to pinned host
    memory in the forward and back in the backward)."""

    full = (8192, 1024, 16, 16, 4096, 8, 2048)
    steps = 1

    def __init__(self, mode: str) -> None:
        if mode not in ("keep", "checkpoint", "offload"):
            raise ValueError(f"mode={mode!r} is not one of 'keep', 'checkpoint', 'offload'")
        self.mode = mode
        # Recomputing a block replays the same kernels on the same inputs, and offloading copies bits: the
        # losses and updates agree exactly on the CPU. On a GPU the attention backward sums in another order from
        # call to call (atomics), and under bf16 autocast a last-bit difference flips a bf16 rounding: the updates
        # of the three modes read 1.8e-3 and 2.0e-3 apart on an H200 (docs/results/h200.md, 2026-11-29 call 3),
        # as any two runs of one mode may. bf16's tolerance, then; a skipped or wrong step is off by O(1).
        self.rtol = 1.6e-2

    def get_config(self) -> BenchmarkConfig:
        # Offloading makes a call ~1 s at full size: room for the warm-up's and the measurement's samples.
        return BenchmarkConfig(timing_mode="cpu", rtol=self.rtol, warmup_timeout_seconds=60.0,
                               measurement_timeout_seconds=60.0)  # fmt: skip

    def speedup_metric(self) -> str:
        return "peak_memory"

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = self.model
        with bf16_autocast():
            h = m.tok(x) + m.pos[: x.shape[1]]
            for block in m.blocks:
                h = checkpoint(block, h, use_reentrant=False) if self.mode == "checkpoint" else block(h)
            return F.cross_entropy(m.head(m.norm(h)).flatten(0, -2), y.flatten())

    def train_step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        if self.mode != "offload":
            return super().train_step(step, x, y)
        pin = self.device.type == "cuda"  # pinned buffers: the copies are DMA, not staged through pageable memory
        with torch.autograd.graph.save_on_cpu(pin_memory=pin):
            loss = self.forward_loss(x, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.losses[step] = loss.detach()
        return None


# --- gradient accumulation: the graph kept alive by a summed loss ----------------------------------------------


class GradAccumulation(LMTraining):
    """One optimizer step over 4 micro-batches of the ``Activations`` model (vocab 8192, d 1024, 16 layers, ff
    4096; 2 x 2048 tokens a micro-batch: the step sees 8 x 2048, as ``Activations``' one batch), bf16 autocast,
    SGD with momentum.

    ``per_micro`` False, the leak: each micro-batch's loss is added to a running total (``total = total +
    loss / n``) and the total's ``backward()`` runs once at the end. Summing tensors that carry their autograd
    history keeps every micro-batch's graph, and with it every saved activation, alive until that backward: the
    peak is a full batch's, which is what accumulation was meant to avoid. ``per_micro`` True: ``(loss /
    n).backward()`` after each forward; the graph and its activations are freed at once, the gradients sum in
    ``.grad``. The same gradients (each micro-batch's are the same kernels on the same inputs; only the order
    in which four fp32 contributions are added differs), the same step.

    Both sides record one call's allocations in set-up on a GPU (``torch.cuda.memory._record_memory_history``)
    and hand the snapshot to the harness (``context().file``: ``memory_snapshot.pickle``, logged under the
    run's ``files/``; open it at https://pytorch.org/memory_viz), in the first round's child only (a later round's
    child only times; the first round's file stays). Output: each micro-batch's loss and the update."""

    full = (8192, 1024, 16, 16, 4096, 2, 2048)
    steps = 4  # micro-batches a step (``LMTraining`` makes one batch of tokens per "step")
    SNAPSHOT = "memory_snapshot.pickle"

    def __init__(self, per_micro: bool) -> None:
        self.per_micro = per_micro
        self.rtol = 1.6e-2  # as Activations': the same model and kernels, bf16 autocast (its comment says why)

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(timing_mode="cpu", rtol=self.rtol)

    def speedup_metric(self) -> str:
        return "peak_memory"

    def setup(self) -> None:
        super().setup()
        ctx = context()
        ctx.record("accumulation", "backward per micro-batch" if self.per_micro else "losses summed, one backward")
        if not ctx.is_cuda:
            ctx.record("memory_snapshot", f"not taken: torch.cuda.memory records CUDA allocations ({ctx.device})")
            return
        if ctx.timing_only:  # a later round's child: the first round's snapshot is the one kept
            return
        # One untimed call under the recorder (Python stacks only: C++ ones take seconds to symbolise).
        torch.cuda.memory._record_memory_history(max_entries=200_000, stacks="python")
        try:
            self.benchmark_fn()
            torch.cuda.synchronize()
            torch.cuda.memory._dump_snapshot(str(ctx.file(self.SNAPSHOT)))
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
        ctx.record("memory_snapshot", f"files/{self.SNAPSHOT}: one call, in set-up")

    def benchmark_fn(self) -> None:
        self.reset()
        self.opt.zero_grad()
        n = self.steps
        total: torch.Tensor | None = None
        for i in range(n):
            loss = self.forward_loss(*self.batch(i))
            self.losses[i] = loss.detach()
            if self.per_micro:
                (loss / n).backward()  # this micro-batch's graph and activations are freed here
            else:
                total = loss / n if total is None else total + loss / n  # keeps every graph alive
        if total is not None:
            total.backward()
        self.opt.step()
        self.finish()


# --- the allocator: expandable segments ---------------------------------------------------------------------


class Fragmentation:
    """A loop whose buffers grow: step i allocates a [rows_i, width] activation (rows growing by an odd
    amount each step, as a batch of ever longer sequences does), computes with it and keeps the last two
    alive. Each request is larger than any block freed before it, so the caching allocator cannot reuse
    them: by default it takes a new segment (cudaMalloc) for each and keeps the old ones cached, and what it
    reserves grows to the sum of every size. With ``expandable_segments`` one segment per stream grows by
    mapping more pages, and a freed block at its end is reused as it grows: reserved stays near what is
    allocated at once.

    Every call starts from ``torch.cuda.empty_cache()`` (on both sides), so its reserved peak is its own.
    Output: each step's sum of its activation times a fixed vector (fp32). The metric: ``peak_reserved``."""

    def __init__(self, expandable: bool) -> None:
        self.expandable = expandable

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(timing_mode="cpu")

    def speedup_metric(self) -> str:
        return "peak_reserved"

    def setup(self) -> None:
        ctx = context()
        self.device = ctx.device
        self.steps, width, start, grow = ctx.size((48, 4096, 1024, 509), (6, 64, 17, 5))
        self.rows = [start + grow * i for i in range(self.steps)]
        if ctx.is_cuda:
            # A setting of this process's caching allocator, made before the variant allocates anything; the
            # baseline states the default explicitly.
            torch.cuda.memory._set_allocator_settings(f"expandable_segments:{self.expandable}")
        ctx.record("allocator", f"expandable_segments:{self.expandable}" if ctx.is_cuda else "the CPU's (no setting)")
        ctx.record("steps", f"{self.steps} activations of [{start} + {grow} i, {width}] fp32, the last two alive")
        self.source = torch.randn(self.rows[-1], width, generator=generator(1), device=self.device)
        self.weight = torch.randn(width, generator=generator(2), device=self.device)
        self.out = torch.empty(self.steps, device=self.device)

    def benchmark_fn(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        alive: list[torch.Tensor] = []
        for i, rows in enumerate(self.rows):
            act = torch.nn.functional.gelu(self.source[:rows] * (1.0 + i / self.steps))  # a new [rows, width]
            self.out[i] = (act @ self.weight).sum()
            alive = [*alive[-1:], act]

    def teardown(self) -> None:
        del self.source, self.weight, self.out

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> dict[str, Any]:
        return {"source": self.source, "weight": self.weight}
