"""What every chapter-13 variant shares: two seeded models, the training loop that resets itself every call,
the image dataset with a real decode and augment cost, and the six problems (one class each; the two sides
of a pair differ in one constructor argument).

**A training step is a benchmark that mutates its state.** Every call first puts the model back where
setup left it (parameters and buffers copied from a snapshot, optimizer state zeroed, which is exactly a
fresh optimizer's state), then runs ``steps`` optimizer steps on batches fixed in setup. So every call
does the same work, a call from a fresh set-up gives the same result as the timed calls
(tests/chapters/test_ch13_training.py checks both), and the output of the last call is comparable between
the two sides: the loss
of every step and the update of every parameter (final minus initial values, flattened into one fp32
vector). Updates, not final weights: a side that skipped training would still have weights within a few
per cent of the initial ones, but its updates would be zero. The conv nets under bf16 are the exception
(``ConvTraining``): their updates are mostly rounding noise, so they give the loss of every step and the
trained model's loss on a probe batch instead. ``get_inputs()`` names what a call reads (the
snapshot and the batches): the harness changes those in place and checks that the losses and updates
follow; parameters, gradients and optimizer state are scratch that each call overwrites first.

**Clock: the wall clock** (``timing_mode="cpu"``: perf_counter around each call, the device synchronized
before start and stop). A training step's cost is the time until the next step can begin, host work and
GPU idle gaps included; several pairs here remove exactly those gaps, which the device clock would hide.

**Profiles.** Every variant's config turns on ``enable_profiling``: after its timed run, a separate child
(bench/profiling.py) records a torch.profiler trace of a few calls, logged to the variant's MLflow run as
``profile/trace.json.gz`` (open it in https://ui.perfetto.dev) with ``profile/top_ops.md``. The README says for
each pair what to look for in the baseline's trace. ``perflab run ... --no-profile`` skips them.

Sizes: full sizes are for an H100; smoke sizes keep each call to milliseconds on a CPU, with lengths that
are no multiples of anything.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench import BenchmarkConfig, context
from chapters.ch01.common import zero_optimizer_state


def generator(offset: int, device: torch.device | None = None) -> torch.Generator:
    """A generator seeded with the run's seed + ``offset`` (distinct values for distinct tensors)."""
    ctx = context()
    return torch.Generator(device=ctx.device if device is None else device).manual_seed(ctx.seed + offset)


def seeded(build: Any, offset: int) -> nn.Module:
    """``build()`` on the run's device, its default generator seeded from the run's seed + ``offset``; the
    caller's RNG state is kept. Built where it runs, not initialised on the host and copied: the LM pairs' 205 M
    parameters took 1.1 s of one set-up on the 2-core CPU host (ZeroGrad's 537 M more), paid again by every round's
    child. The initial weights are the device generator's: the same on both sides of a pair, not the same on a CPU
    and a GPU."""
    ctx = context()
    gpus = [ctx.device.index if ctx.device.index is not None else torch.cuda.current_device()] if ctx.is_cuda else []
    with torch.random.fork_rng(devices=gpus), ctx.device:
        torch.manual_seed(ctx.seed + offset)
        return build()


def bf16_autocast(on: bool = True) -> AbstractContextManager[Any]:
    """bf16 autocast on the run's device (matmuls and convolutions in bf16, reductions and the loss in
    fp32, weights and their gradients fp32), or nothing."""
    return torch.autocast(context().device.type, dtype=torch.bfloat16) if on else nullcontext()


# --- models -----------------------------------------------------------------------------------------


class Block(nn.Module):
    """A pre-norm transformer block: LayerNorm, causal attention (SDPA), LayerNorm, GELU MLP; biases
    everywhere: 12 parameter tensors."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    """A GPT-style language model: token + learned position embeddings, ``layers`` blocks, a final norm and
    an untied head. 12 * layers + 5 parameter tensors; 12 d² + 13 d (+ 2 d ff) parameters per block."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int, ff: int, seq: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.tok(idx) + self.pos[: idx.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def lm_flops(model: LM, tokens: int, seq: int) -> int:
    """Matmul FLOPs of one forward + backward over ``tokens`` tokens in rows of ``seq``: 6 per token and
    weight of every Linear (forward 2, backward 4), plus causal attention (QKᵀ and PV, half the square)."""
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    d = model.norm.normalized_shape[0]
    attention = 3 * 2 * 2 * tokens * seq * d * len(model.blocks) // 2
    return 6 * linear * tokens + attention


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with batch norm, the input added back (a strided 1x1
    convolution where the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x if self.down is None else self.down(x)
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + skip)


class ConvNet(nn.Module):
    """A ResNet-18-shaped classifier: a stride-2 stem, ``len(widths)`` stages of ``blocks`` basic blocks (each
    stage after the first halves the resolution), global average pooling, a linear head."""

    def __init__(self, widths: tuple[int, ...], blocks: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            for j in range(blocks):
                layers.append(BasicBlock(cin, w, 2 if i > 0 and j == 0 else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.stem(x)).mean((2, 3)))


def conv_flops(model: nn.Module, images: int, size: int) -> int:
    """Convolution and linear FLOPs of one forward + backward over ``images`` images of ``size`` x ``size``
    (3x the forward's 2 per weight and output pixel), counted by running one image through ``model``, a
    copy built on the meta device (no memory, no random numbers)."""
    total = 0

    def count(module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
        nonlocal total
        if isinstance(module, nn.Conv2d):
            total += 2 * module.weight.numel() * output.shape[-2] * output.shape[-1]
        elif isinstance(module, nn.Linear):
            total += 2 * module.weight.numel()

    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            m.register_forward_hook(count)
    with torch.no_grad():
        model(torch.empty(1, 3, size, size, device="meta"))
    return 3 * total * images


# --- the training loop ------------------------------------------------------------------------------


class Training:
    """``steps`` optimizer steps per call, each call from the state setup left (see the module docstring).

    A subclass builds the model (``make_model``), the optimizer (``make_optimizer``), its batches
    (``prepare``, ``batch``) and, where the pair is about it, the step itself (``train_step``). Output: the
    per-step losses and the flattened parameter updates, fp32.
    """

    steps = 1
    amp = True  # bf16 autocast around forward and loss
    rtol: float | None = None  # None: the fp32 default (1e-5); a pair that changes rounding says why

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(timing_mode="cpu", enable_profiling=True, rtol=self.rtol)

    # -- to be provided
    def make_model(self) -> nn.Module:
        raise NotImplementedError

    def make_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)

    def prepare(self) -> None:
        """Make the batches (called at the end of setup)."""

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with bf16_autocast(self.amp):
            return F.cross_entropy(self.model(x).flatten(0, -2), y.flatten())

    def train_step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        loss = self.forward_loss(x, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.losses[step] = loss.detach()  # a device-side copy: the host does not wait

    # -- the benchmark
    def setup(self) -> None:
        self.device = context().device
        self.model = self.make_model()
        self.params = list(self.model.parameters())
        self.buffers = list(self.model.buffers())
        self.opt = self.make_optimizer(self.params)
        with torch.no_grad():
            self.init = [p.detach().clone() for p in self.params]  # clone keeps each tensor's memory format
            self.init_buffers = [b.clone() for b in self.buffers]
            self.flat_init = torch.cat([p.reshape(-1) for p in self.params])
        self.update = torch.empty_like(self.flat_init)
        self.losses = torch.empty(self.steps, device=self.device)
        self.prepare()

    def reset(self) -> None:
        """Back to the set-up state: parameters and buffers from the snapshot, optimizer state zeroed (a fresh
        AdamW or SGD state: zero moments, step 0). A few multi-tensor kernels, the same on both sides."""
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.init)
            if self.buffers:  # batch norm's running statistics and counters
                torch._foreach_copy_(self.buffers, self.init_buffers)
            zero_optimizer_state(self.opt)

    def benchmark_fn(self) -> None:
        self.reset()
        for i in range(self.steps):
            self.train_step(i, *self.batch(i))
        self.finish()

    def finish(self) -> None:
        """After the last step: the output's last part (here the flattened updates)."""
        with torch.no_grad():
            torch.cat([p.reshape(-1) for p in self.params], out=self.update).sub_(self.flat_init)

    def teardown(self) -> None:
        del self.model, self.params, self.buffers, self.opt, self.init, self.init_buffers
        del self.flat_init, self.update, self.losses

    def get_output(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.losses, self.update

    def get_work(self) -> dict[str, Any]:
        """The subclass's FLOPs (``self.work``, made in setup) and the matmuls' precision, not the losses'."""
        return {**self.work, "dtype": "bf16" if self.amp else "fp32"}

    def get_inputs(self) -> dict[str, Any]:
        """What a call reads: the snapshot it resets from and the batches. The parameters, gradients and
        optimizer state are scratch that every call overwrites first; the harness changes these inputs in
        place and checks that the output follows."""
        return {"init": self.init, "init_buffers": self.init_buffers, "flat_init": self.flat_init, **self.data()}

    def data(self) -> dict[str, torch.Tensor]:
        """The batches' tensors (none where a DataLoader makes them from files in memory)."""
        return {}


class LMTraining(Training):
    """Training steps of ``LM`` on seeded random tokens (next-token targets), bf16 autocast, batches on the
    device from setup. ``shape``: (vocab, d, heads, layers, ff, batch, seq) at full and smoke size."""

    full: tuple[int, ...] = (8192, 512, 8, 12, 2048, 4, 256)
    smoke: tuple[int, ...] = (97, 24, 4, 2, 40, 3, 11)

    def make_model(self) -> nn.Module:
        ctx = context()
        vocab, d, heads, layers, ff, self.rows, self.seq = ctx.size(self.full, self.smoke)
        ctx.record("model", f"LM vocab {vocab}, d {d}, {heads} heads, {layers} layers, ff {ff}")
        ctx.record("batch", f"{self.steps} steps x {self.rows} x {self.seq} tokens")
        return seeded(lambda: LM(vocab, d, heads, layers, ff, self.seq), offset=1)

    def prepare(self) -> None:
        vocab = self.model.head.out_features
        self.tokens = torch.randint(vocab, (self.steps, self.rows, self.seq + 1), generator=generator(2),
                                    device=self.device)  # fmt: skip
        ctx = context()
        ctx.record("parameters", sum(p.numel() for p in self.params))
        ctx.record("parameter_tensors", len(self.params))
        self.work = {"flops": self.steps * lm_flops(self.model, self.rows * self.seq, self.seq)}

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.tokens[step]
        return t[:, :-1], t[:, 1:]

    def data(self) -> dict[str, torch.Tensor]:
        return {"tokens": self.tokens}

    def teardown(self) -> None:
        del self.tokens
        super().teardown()


def adamw(params: list[nn.Parameter], **impl: bool) -> torch.optim.AdamW:
    """AdamW as the optimizer pairs use it; ``impl``: foreach= or fused=."""
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, **impl)


# --- amp ----------------------------------------------------------------------------------------------


class Amp(LMTraining):
    """amp: the same steps in fp32 (``amp=False``) or under bf16 autocast. Larger than the other LM pairs, so
    matmuls dominate: vocab 8192, d 768, 12 heads, 8 layers, ff 3072, 8 x 512 tokens, 2 steps, SGD."""

    full = (8192, 768, 12, 8, 3072, 8, 512)
    steps = 2

    def __init__(self, amp: bool) -> None:
        self.amp = amp
        # bf16 matmuls round their inputs to 8 bits of mantissa: the losses and updates move by ~1 % of
        # their norm (measured at smoke size on the CPU: see tests/chapters/test_ch13_training.py).
        self.rtol = 5e-2


# --- optimizer ------------------------------------------------------------------------------------------


class Optimizer(LMTraining):
    """optimizer: AdamW as a Python loop over parameters (``foreach=False``), over lists (``foreach=True``),
    or one fused kernel (``fused=True``); 12 layers = 149 parameter tensors, 4 steps."""

    steps = 4

    def __init__(self, impl: str) -> None:
        if impl not in ("loop", "foreach", "fused"):
            raise ValueError(f"impl={impl!r} is not one of 'loop', 'foreach', 'fused'")
        self.impl = impl
        # AdamW divides by sqrt(v) + eps: a weight whose gradient is rounding noise near eps still moves by
        # ~lr, in a direction set by its last bits, so implementations that sum in another order disagree
        # there. Measured on the H100 (bf16 autocast): fused and foreach against the loop, 6.9e-3 and
        # 6.7e-3 of the updates' norm; the losses agree to 1e-6. A wrong or skipped step is off by O(1).
        self.rtol = 2e-2

    def make_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return adamw(params, **{"loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[
            self.impl
        ])  # fmt: skip


# --- zero_grad --------------------------------------------------------------------------------------------


class ZeroGrad(LMTraining):
    """zero_grad: gradients zeroed in place (``set_to_none=False``) or dropped, before each backward; fused
    AdamW on both sides, 4 steps. A wide, shallow model on few tokens (vocab 16384, d 4096, 2 layers, ff
    16384: 537 M parameters in 29 tensors, 1 x 128 tokens per step), so a step is bound by parameter-sized
    memory traffic, which is what the gradients' zeroing and accumulation add to, with ~8 ms of it per step
    against the host's ~1-2 ms of launches. (A deep narrow model's step is bound by the host issuing ops: 25
    ms per step on the H100, where the zeroing's traffic does not show; at 168 M parameters the H100 read
    1.08x and 0.97x on two hosts, the device waiting on the host for part of each step.)"""

    full = (16384, 4096, 32, 2, 16384, 1, 128)
    steps = 4

    def __init__(self, set_to_none: bool) -> None:
        self.set_to_none = set_to_none

    def make_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return adamw(params, fused=True)

    def train_step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        loss = self.forward_loss(x, y)
        self.model.zero_grad(set_to_none=self.set_to_none)
        loss.backward()
        self.opt.step()
        self.losses[step] = loss.detach()


# --- host_sync --------------------------------------------------------------------------------------------


PAD = -100  # F.cross_entropy's default ignore_index


class HostSync(LMTraining):
    """host_sync: a fine-tuning loop on padded rows (the tail of each row is padding, a seeded length per row)
    that logs, every step, the loss, the total gradient norm and each parameter's gradient norm (what a
    training dashboard plots per layer), clips the gradients to norm 1 and stops on a non-finite value. With
    ``sync=True`` the host reads every value as it is produced; otherwise everything stays on the device
    until the call ends. 64 x 256 tokens per step, 4 steps, fused AdamW: enough device work per step (~25 ms
    on an H100) that the loop without waits is bound by the GPU, not by the host's ~5 ms of launches (at 16
    rows both sides were host-bound, and the H100 read 1.52x and 1.14x on two hosts)."""

    full = (8192, 512, 8, 12, 2048, 64, 256)
    steps = 4

    def __init__(self, sync: bool) -> None:
        self.sync = sync
        # Averaging the kept tokens' losses in another order (a gathered subset vs all rows with padding
        # ignored) changes the last bits of the loss and so of every gradient: updates agree to ~1e-6.
        self.rtol = 1e-4

    def make_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return adamw(params, fused=True)

    def prepare(self) -> None:
        super().prepare()
        g = generator(3)
        lengths = torch.randint(self.seq // 2, self.seq + 1, (self.steps, self.rows), generator=g, device=self.device)
        positions = torch.arange(self.seq, device=self.device)
        self.keep = positions < lengths[..., None]  # [steps, rows, seq]: True for real tokens
        self.targets = torch.where(self.keep, self.tokens[..., 1:], PAD)  # padding's targets ignored
        self.values = torch.empty(self.steps, 2 + len(self.params), device=self.device)  # the log, on the device
        self.log: list[list[float]] = []  # per step: loss, total gradient norm, each parameter's gradient norm

    def data(self) -> dict[str, torch.Tensor]:
        return {"tokens": self.tokens, "keep": self.keep, "targets": self.targets}

    def train_step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        if self.sync:
            keep = self.keep[step]
            with bf16_autocast():
                logits = self.model(x)[keep]  # boolean indexing: the host must learn how many rows survive
                loss = F.cross_entropy(logits, y[keep])
            if not torch.isfinite(loss):  # bool(tensor): the host waits for the forward
                raise FloatingPointError(f"step {step}: loss is {loss.item()}")
        else:
            with bf16_autocast():
                loss = F.cross_entropy(self.model(x).flatten(0, 1), self.targets[step].flatten())
        self.opt.zero_grad()
        loss.backward()
        if self.sync:  # a wait per parameter: each norm's kernel runs, its 4 bytes come back, then the next
            norms = [p.grad.norm().item() for p in self.params]  # type: ignore[union-attr]
        else:  # the same kernels, queued
            per_param = [p.grad.norm() for p in self.params]  # type: ignore[union-attr]
        total = torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        if self.sync:
            row = [loss.item(), total.item(), *norms]  # two more waits: the optimizer step has not started
            self.log.append(row)
            if not all(map(math.isfinite, row)):
                raise FloatingPointError(f"step {step}: non-finite gradient norm in {row[:4]}...")
        else:
            torch.stack([loss.detach(), total, *per_param], out=self.values[step])
        self.opt.step()
        self.losses[step] = loss.detach()

    def benchmark_fn(self) -> None:
        super().benchmark_fn()
        if not self.sync:  # the same log and the same checks, once per call: one wait instead of ~150 per step
            rows = self.values.tolist()
            self.log.extend(rows)
            if not all(math.isfinite(v) for row in rows for v in row):
                raise FloatingPointError(f"non-finite loss or gradient norm in {[row[:4] for row in rows]}...")
        del self.log[: -self.steps]  # keep the last call's log only

    def teardown(self) -> None:
        del self.keep, self.targets, self.values, self.log
        super().teardown()


# --- conv nets ------------------------------------------------------------------------------------------


class ConvTraining(Training):
    """Training steps of ``ConvNet`` under bf16 autocast, SGD with momentum. ``shape``: (widths, blocks,
    classes, batch, image size) at full and smoke size."""

    full: tuple[Any, ...] = ((64, 128, 256, 512), 2, 1000, 64, 224)
    smoke: tuple[Any, ...] = ((8, 16), 1, 10, 3, 18)
    # The output is the loss of every step and the trained model's loss on the probe batch, not the updates.
    # Under bf16 a convolution's weight gradient ahead of batch norm is a sum of ~10^5 terms that nearly
    # cancel (batch norm removes each channel's scale and shift): its rounding noise is ~25 % of its norm,
    # whichever layout or algorithm sums it (measured: two layouts' updates differ by 24 % after one step
    # on the CPU, 31 % after four on an H100). The losses are what that noise hardly moves: two layouts'
    # differ by 1.9e-3 (16 images of 112², CPU), the last update skipped moves them by 1.2e-2.
    rtol = 5e-3

    def setup(self) -> None:
        super().setup()
        self.losses = torch.empty(self.steps + 1, device=self.device)

    def finish(self) -> None:
        """The trained model's loss on the probe batch (batch statistics, as in training; no gradients)."""
        with torch.no_grad():
            self.losses[self.steps] = self.forward_loss(*self.probe()).detach()

    def probe(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.batch(0)

    def get_output(self) -> tuple[torch.Tensor, ...]:
        return (self.losses,)

    def make_model(self) -> nn.Module:
        ctx = context()
        widths, blocks, classes, self.rows, self.size = ctx.size(self.full, self.smoke)
        self.classes = classes
        ctx.record("model", f"ConvNet widths {widths}, {blocks} blocks per stage, {classes} classes")
        ctx.record("batch", f"{self.steps} steps x {self.rows} images of {self.size}²")
        with torch.device("meta"):
            counted = ConvNet(widths, blocks, classes)
        step = conv_flops(counted, self.rows, self.size)
        self.work = {"flops": self.steps * step + step // 3}  # and the probe's forward pass
        return seeded(lambda: ConvNet(widths, blocks, classes), offset=1)


class ChannelsLast(ConvTraining):
    """channels_last: the model and each batch in NCHW (``channels_last=False``) or NHWC memory layout. The
    batches wait on the device in NCHW, as a loader hands them over; 4 steps of 64 images of 224²."""

    steps = 4

    def __init__(self, channels_last: bool) -> None:
        self.channels_last = channels_last
        self.format = torch.channels_last if channels_last else torch.contiguous_format

    def make_model(self) -> nn.Module:
        return super().make_model().to(memory_format=self.format)

    def prepare(self) -> None:
        self.images = torch.randn(self.steps, self.rows, 3, self.size, self.size, generator=generator(2),
                                  device=self.device)  # fmt: skip
        self.labels = torch.randint(self.classes, (self.steps, self.rows), generator=generator(3), device=self.device)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[step].contiguous(memory_format=self.format), self.labels[step]

    def data(self) -> dict[str, torch.Tensor]:
        return {"images": self.images, "labels": self.labels}

    def teardown(self) -> None:
        del self.images, self.labels
        super().teardown()


# --- dataloader ---------------------------------------------------------------------------------------------

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)  # ImageNet's channel statistics
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def smooth_images(count: int, size: int, seed: int) -> Iterator[np.ndarray]:
    """Seeded photograph-like uint8 [size, size, 3] images: a coarse random field upsampled, plus noise."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(count):
        coarse = torch.rand(1, 3, max(2, size // 16), max(2, size // 16), generator=g) * 200 + 28
        fine = F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=False)
        fine += torch.randn(fine.shape, generator=g) * 6
        yield fine.clamp_(0, 255).to(torch.uint8)[0].permute(1, 2, 0).contiguous().numpy()


def jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(image).save(out, format="JPEG", quality=quality)
    return out.getvalue()


class JpegDataset(torch.utils.data.Dataset):
    """Record i: a JPEG in memory; ``__getitem__`` decodes it (PIL), takes a random crop of 60-100 % of its
    side, resizes it to ``size`` (bilinear), flips it half the time and normalizes it: CHW fp32, and its
    label. The randomness comes from (seed, i), never from the process's RNG, so the same record gives the
    same sample in the main process and in any worker."""

    def __init__(self, blobs: list[bytes], labels: list[int], size: int, seed: int) -> None:
        self.blobs, self.labels, self.size, self.seed = blobs, labels, size, seed

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        rng = random.Random(self.seed * 1_000_003 + i)
        img = Image.open(io.BytesIO(self.blobs[i]))
        img.draft("RGB", img.size)  # decode at full resolution (no DCT-domain downscaling)
        side = img.size[0]
        crop = int(side * rng.uniform(0.6, 1.0))
        left, top = rng.randrange(side - crop + 1), rng.randrange(side - crop + 1)
        img = img.convert("RGB").resize((self.size, self.size), Image.Resampling.BILINEAR,
                                        box=(left, top, left + crop, top + crop))  # fmt: skip
        if rng.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        a = (np.asarray(img, dtype=np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(a.transpose(2, 0, 1).copy()), self.labels[i]


class Loader(ConvTraining):
    """dataloader: one pass over 512 JPEGs of 160² (8 steps of 64 images cropped and resized to 128²) through a
    DataLoader, a training step per batch. ``fast=False``: the DataLoader's defaults (decoding in the main
    process, pageable batches, blocking copies); ``fast=True``: worker processes, pinned batches, copies
    that do not block the host."""

    full = ((64, 128, 256), 1, 100, 64, 128)
    smoke = ((8, 16), 1, 10, 4, 12)
    steps = 8
    source = (160, 20)  # stored image side (full, smoke)

    def __init__(self, fast: bool) -> None:
        self.fast = fast

    def prepare(self) -> None:
        ctx = context()
        count, side = self.steps * self.rows, ctx.size(*self.source)
        labels = torch.randint(self.classes, (count,), generator=generator(3, torch.device("cpu"))).tolist()
        blobs = [jpeg(img) for img in smooth_images(count, side, ctx.seed + 4)]
        ctx.record("jpeg_kib", round(sum(map(len, blobs)) / count / 1024, 1))
        dataset = JpegDataset(blobs, labels, self.size, ctx.seed)
        # The probe batch: the first batch, decoded once here (the dataset gives the same samples anywhere).
        x, y = torch.utils.data.default_collate([dataset[i] for i in range(self.rows)])
        self.probe_batch = x.to(self.device), y.to(self.device)
        cuda = self.device.type == "cuda"
        if self.fast:
            import os

            self.workers = ctx.record("workers", ctx.size(max(1, min(8, len(os.sched_getaffinity(0)) // 2)), 1))
            self.loader = torch.utils.data.DataLoader(
                dataset, batch_size=self.rows, num_workers=self.workers, pin_memory=cuda,
                persistent_workers=True, prefetch_factor=4,
            )  # fmt: skip
        else:
            self.loader = torch.utils.data.DataLoader(dataset, batch_size=self.rows)

    def benchmark_fn(self) -> None:
        self.reset()
        for i, (x, y) in enumerate(self.loader):
            # From pinned memory a non_blocking copy is a DMA queued behind the previous step: the host goes
            # on to fetch the next batch. From pageable memory it would be synchronous anyway.
            x, y = x.to(self.device, non_blocking=self.fast), y.to(self.device, non_blocking=self.fast)
            self.train_step(i, x, y)
        self.finish()

    def probe(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.probe_batch

    def data(self) -> dict[str, torch.Tensor]:
        return {"probe_images": self.probe_batch[0]}

    def teardown(self) -> None:
        del self.loader, self.probe_batch  # persistent workers exit with their loader
        super().teardown()
