"""What every chapter-12 variant shares: seeded inputs, small fp32 models (residual MLP blocks with RMSNorm, a
toy decoder around them, a plain MLP to train), the capture helper, and the six problems (one class each; the
two sides of a pair differ in one attribute or method).

CUDA graphs. A graph records a sequence of kernels once (capture) and launches all of them with one call
(replay): the host's per-kernel cost (Python, dispatcher, driver: ~10-20 µs per op on the H100 host,
INTEGRITY.md) is paid once, at capture. Replay runs each kernel with the arguments it had at capture: the
same buffers (their *contents* may change: inputs are static buffers written before each replay), the
same shapes, the same Python scalars. Everything here is captured in ``setup()`` (the harness never times
a capture) except where re-capture is the baseline's cost (graph_update). Every replay reads its inputs
from the tensors set up in ``setup()``: the harness changes them in place and checks that the output
follows.

Clocks. Five pairs are about host launch cost, which the harness's default cuda_event clock hides (it
queues each call behind a spin kernel so that launch gaps stay out of the sample): they are timed on the
host's wall clock (``timing_mode="cpu"``, device synchronized before start and stop), as chapter 1's
cuda_graph pair is. multistream_graph is about what the GPU does inside one replay and keeps the default
device clock.

On a CPU there are no graphs and no streams: ``Graph`` calls its function eagerly, side streams are
``None``, and every variant runs the same eager operations in order (bucket padding, parameter tensors and
the compiled model included: torch.compile builds C++ kernels there, without CUDA graphs). Outputs match
the GPU's; times show no speedup. Smoke sizes keep each call to milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F

from bench import BenchmarkConfig, context
from chapters.ch01.common import busiest_lane_ms, stated_ceiling, zero_optimizer_state

EPS = 1e-6  # RMSNorm epsilon
Stream = Any  # torch.cuda.Stream on a GPU, None on a CPU


def wall_clock() -> BenchmarkConfig:
    """timing_mode="cpu": perf_counter around each call, device synchronized before start and stop (the
    host's launch cost is what these pairs remove, and the default clock would hide it)."""
    return BenchmarkConfig(timing_mode="cpu")


def generator(offset: int, device: torch.device | None = None) -> torch.Generator:
    """A generator seeded with the run's seed + ``offset`` (distinct values for distinct tensors)."""
    ctx = context()
    return torch.Generator(device=ctx.device if device is None else device).manual_seed(ctx.seed + offset)


def randn(*shape: int, offset: int, scale: float = 1.0) -> torch.Tensor:
    """Fresh N(0, scale²) fp32 values on the run's device."""
    x = torch.randn(*shape, generator=generator(offset), device=context().device)
    return x.mul_(scale) if scale != 1.0 else x


def ragged(count: int, most: int, offset: int) -> list[tuple[int, int]]:
    """``count`` seeded lengths in [1, most], as (start, stop) rows of one packed tensor."""
    lengths = torch.randint(1, most + 1, (count,), generator=generator(offset, torch.device("cpu"))).tolist()
    ends = torch.tensor(lengths).cumsum(0).tolist()
    return [(end - n, end) for n, end in zip(lengths, ends, strict=True)]


def _weight(t: torch.Tensor) -> torch.nn.Parameter:
    # Parameters (no grad) rather than plain tensors: torch.compile's CUDA graphs treat a module's parameters
    # as static inputs (read in place), where a plain tensor argument would be copied in at every replay.
    return torch.nn.Parameter(t, requires_grad=False)


# --- the model ------------------------------------------------------------------------------------


class Blocks(torch.nn.Module):
    """``layers`` residual blocks h = h + gelu(rmsnorm(h) @ W1) @ W2, fp32; rows are independent.

    Eager, each block is ~5-9 kernels (the norm, two matmuls, gelu, the residual add): a few µs of GPU
    work each at these sizes, far less than the host takes to launch them.
    """

    def __init__(self, layers: int, width: int, hidden: int, offset: int) -> None:
        super().__init__()
        self.norms = _weight(1.0 + 0.1 * randn(layers, width, offset=offset))
        self.w1 = _weight(randn(layers, width, hidden, offset=offset + 1, scale=1 / math.sqrt(width)))
        self.w2 = _weight(randn(layers, hidden, width, offset=offset + 2, scale=1 / math.sqrt(hidden)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for g, w1, w2 in zip(self.norms, self.w1, self.w2, strict=True):
            h = h + F.gelu(F.rms_norm(h, g.shape, g, EPS) @ w1) @ w2
        return h

    def flops_per_row(self) -> int:
        layers, width, hidden = self.w1.shape
        return 4 * layers * width * hidden

    def weight_bytes(self) -> int:
        return 4 * (self.norms.numel() + self.w1.numel() + self.w2.numel())


class Decoder(torch.nn.Module):
    """A toy greedy decoder: token -> embedding -> ``Blocks`` -> RMSNorm -> logits (its own head) -> argmax."""

    def __init__(self, layers: int, width: int, hidden: int, vocab: int) -> None:
        super().__init__()
        self.emb = _weight(randn(vocab, width, offset=1))
        self.blocks = Blocks(layers, width, hidden, offset=2)
        self.norm = _weight(1.0 + 0.1 * randn(width, offset=5))
        self.head = _weight(randn(width, vocab, offset=6, scale=1 / math.sqrt(width)))

    def step(self, tok: torch.Tensor, logits: torch.Tensor) -> None:
        """One decode step in place: reads ``tok`` [batch], writes ``logits`` [batch, vocab] and the next ``tok``."""
        h = self.blocks(F.embedding(tok, self.emb))
        torch.mm(F.rms_norm(h, self.norm.shape, self.norm, EPS), self.head, out=logits)
        torch.argmax(logits, dim=1, out=tok)


# --- graphs and streams ---------------------------------------------------------------------------


class Graph:
    """``fn`` (device work on fixed buffers, no host sync) captured once into a CUDA graph; calling replays it.

    torch's recipe: a few calls on a side stream first (lazy set-up such as cuBLAS workspaces must not
    happen inside a capture), then the capture, on torch.cuda.graph's own stream. On a CPU: no graph,
    calling runs ``fn``.
    """

    def __init__(self, fn: Callable[[], Any], warmup: int = 3) -> None:
        self.fn = fn
        self.graph: Any = None
        if not context().is_cuda:
            return
        current = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(current)
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        current.wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            fn()

    def __call__(self) -> None:
        if self.graph is None:
            self.fn()
        else:
            self.graph.replay()


def side_streams(n: int) -> list[Stream]:
    """``n`` new side streams on a GPU; ``n`` Nones on a CPU."""
    return [torch.cuda.Stream() for _ in range(n)] if context().is_cuda else [None] * n


def on(stream: Stream) -> AbstractContextManager[Any]:
    """Make ``stream`` current inside the block; ``None`` leaves the current stream as it is."""
    return torch.cuda.stream(stream) if stream is not None else nullcontext()


def fork(streams: Sequence[Stream]) -> None:
    """Each side stream waits for what the current stream has queued (inside a capture: joins the capture)."""
    for s in streams:
        if s is not None:
            s.wait_stream(torch.cuda.current_stream())


def join(streams: Sequence[Stream]) -> None:
    """The current stream waits for every side stream (inside a capture: the branches end in one node)."""
    for s in streams:
        if s is not None:
            torch.cuda.current_stream().wait_stream(s)


# --- the shell ------------------------------------------------------------------------------------


class Shell:
    """A variant's shell: ``prepare()`` allocates (and captures), one untimed call settles the buffers.

    The untimed call leaves each static buffer holding what every call leaves in it, so the harness's watch
    over the tensors set up in ``setup()`` sees no change from the timed calls; the outputs are NaN-poisoned
    before the timed calls, which rewrite them.
    """

    config: BenchmarkConfig | None = wall_clock()
    out: torch.Tensor | tuple[torch.Tensor, ...]
    work: dict[str, int]

    def get_config(self) -> BenchmarkConfig | None:
        return self.config

    def prepare(self) -> None:
        raise NotImplementedError

    def setup(self) -> None:
        self.prepare()
        self.benchmark_fn()

    def benchmark_fn(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        vars(self).clear()  # every tensor, graph and stream prepare() made

    def get_output(self) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return self.out

    def get_work(self) -> dict[str, int]:
        return self.work


# --- decode_loop ----------------------------------------------------------------------------------


class Decode(Shell):
    """decode_loop: 16 greedy decode steps for a batch of 8 sequences through a 4-layer decoder (width 512,
    hidden 1024, vocabulary 4096, fp32, 32 MiB of weights), each step's token fed to the next.

    Each call starts from the same prompt tokens and writes every step's tokens (``out[0]``, [steps,
    batch]) and the last step's logits (``out[1]``). One step is ~25-45 small kernels (the embedding, 4
    blocks, the final norm, the head matmul, the argmax); ``advance()`` runs one. Work per call, both sides: 2 x batch x
    (4 x 2 x 512 x 1024 + 512 x 4096) FLOPs per step (~1.4 GFLOP per call); bytes: the weights once (they
    fit in L2) and the activations.
    """

    def prepare(self) -> None:
        ctx = context()
        batch, layers, width, hidden, vocab, self.steps = ctx.size((8, 4, 512, 1024, 4096, 16), (3, 2, 24, 40, 37, 5))
        ctx.record("batch x steps", f"{batch}x{self.steps}")
        self.model = Decoder(layers, width, hidden, vocab)
        self.prompt = torch.randint(vocab, (batch,), generator=generator(7), device=ctx.device)
        self.tok = self.prompt.clone()
        self.logits = torch.empty(batch, vocab, device=ctx.device)
        self.out = (torch.empty(self.steps, batch, dtype=torch.long, device=ctx.device), self.logits)
        weights = self.model.blocks.weight_bytes() + 4 * (2 * vocab * width + width)
        self.work = {
            # The weights once (they fit in L2), then per step the embedded rows read and the logits written.
            "bytes": weights + self.steps * 4 * batch * (width + vocab),
            "flops": self.steps * batch * (self.model.blocks.flops_per_row() + 2 * width * vocab),
        }
        self.advance = self.stepper()

    def stepper(self) -> Callable[[], None]:
        """What one decode step costs the host: here eager, every kernel launched from Python."""
        return lambda: self.model.step(self.tok, self.logits)

    def benchmark_fn(self) -> None:
        tokens = self.out[0]
        self.tok.copy_(self.prompt)
        for t in range(self.steps):
            self.advance()
            tokens[t].copy_(self.tok)


# --- shape_buckets --------------------------------------------------------------------------------


def bucket_for(rows: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds ``rows``; a request larger than every bucket is an error."""
    for b in sorted(buckets):
        if rows <= b:
            return b
    raise ValueError(f"a request of rows={rows} is larger than the largest bucket; buckets: {sorted(buckets)}")


class Requests(Shell):
    """shape_buckets: 24 requests of 1-64 rows (seeded, ragged; packed in ``x``), each through a 4-block
    ``Blocks`` model (width 512, hidden 1024, fp32) into its rows of ``out``, one request after another (as
    they arrive in a server). Rows are independent, so padding a request with extra rows changes none of
    its own.

    Work per call, both sides: the useful rows only (padding is the optimized side's own cost), 4 x 4 x
    512 x 1024 FLOPs per row; bytes: x and out once, the weights once (16 MiB, L2-resident).
    """

    def prepare(self) -> None:
        ctx = context()
        count, most, layers, width, hidden = ctx.size((24, 64, 4, 512, 1024), (5, 9, 2, 24, 40))
        ctx.record("requests", count)
        self.bounds = ragged(count, most, offset=8)
        self.model = Blocks(layers, width, hidden, offset=2)
        self.x = randn(self.bounds[-1][1], width, offset=0)
        self.out = torch.empty_like(self.x)
        rows = self.x.shape[0]
        self.work = {
            "bytes": 8 * rows * width + self.model.weight_bytes(),
            "flops": rows * self.model.flops_per_row(),
        }
        self.capture()

    def capture(self) -> None:
        """Set up what the calls reuse (nothing, eagerly)."""

    def run(self, start: int, stop: int) -> None:
        """Request ``x[start:stop]``: eagerly, at its own shape."""
        self.out[start:stop] = self.model(self.x[start:stop])

    def benchmark_fn(self) -> None:
        for start, stop in self.bounds:
            self.run(start, stop)


# --- compile_reduce_overhead ----------------------------------------------------------------------


class Stack(Shell):
    """compile_reduce_overhead: one forward of an 8-block ``Blocks`` model (width 512, hidden 1024, fp32) on a
    batch of 16 rows, copied into ``out``: ~60 small kernels eagerly.

    Work per call, both sides: 16 x 8 x 4 x 512 x 1024 FLOPs (~0.27 GFLOP); bytes: the weights (32 MiB) and
    the activations, once.
    """

    def prepare(self) -> None:
        ctx = context()
        batch, layers, width, hidden = ctx.size((16, 8, 512, 1024), (5, 2, 24, 40))
        self.model = Blocks(layers, width, hidden, offset=2)
        self.x = randn(batch, width, offset=0)
        self.out = torch.empty_like(self.x)
        self.work = {
            "bytes": 8 * batch * width + self.model.weight_bytes(),
            "flops": batch * self.model.flops_per_row(),
        }
        self.forward = self.compiled()

    def compiled(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The forward a call runs: here the eager module."""
        return self.model

    def benchmark_fn(self) -> None:
        self.out.copy_(self.forward(self.x))


# --- graph_update ---------------------------------------------------------------------------------


class Denoise(Shell):
    """graph_update: 8 steps of x = x - sigma_i * f(x), f a 2-block ``Blocks`` model (batch 64, width 256,
    hidden 512, fp32), with a different sigma each step (a sampler's noise schedule, a per-request
    temperature: a value that changes every time).

    The schedule lives in the set-up tensors (``sigmas``: the host copy the baseline reads as Python floats,
    the device copy the optimized side reads in place). Each call starts from ``x0``. One step is ~20
    kernels. Work per call, both sides: 8 x 64 rows x f's FLOPs (~0.27 GFLOP); bytes: f's weights once and x.
    """

    def prepare(self) -> None:
        ctx = context()
        batch, layers, width, hidden, self.steps = ctx.size((64, 2, 256, 512, 8), (5, 2, 24, 40, 4))
        self.model = Blocks(layers, width, hidden, offset=2)
        self.x0 = randn(batch, width, offset=0)
        self.x = torch.empty_like(self.x0)  # the state the steps update in place
        sigmas = 0.05 + 0.2 * torch.rand(self.steps, generator=generator(9, torch.device("cpu")))
        self.load_schedule(sigmas)
        self.out = self.x
        self.work = {
            "bytes": 8 * batch * width + self.model.weight_bytes(),
            "flops": self.steps * batch * self.model.flops_per_row(),
        }

    def load_schedule(self, sigmas: torch.Tensor) -> None:
        """Keep the schedule (a host tensor) where ``update`` reads it, and set up what it reuses."""
        raise NotImplementedError

    def update(self, i: int) -> None:
        """Step ``i``: x = x - sigma_i * f(x)."""
        raise NotImplementedError

    def step(self, sigma: float | torch.Tensor) -> None:
        """x = x - sigma * f(x), in place; ``sigma`` a Python float (a kernel argument) or a 0-d device tensor."""
        self.x.sub_(self.model(self.x) * sigma)

    def benchmark_fn(self) -> None:
        self.x.copy_(self.x0)
        for i in range(self.steps):
            self.update(i)


# --- multistream_graph ----------------------------------------------------------------------------


class Experts(Shell):
    """multistream_graph: a mixture-of-experts layer for one decode step: 8 experts, the step's tokens already
    grouped by expert (ragged, 1-32 tokens each, packed in ``x``), each expert's MLP gelu(x_e @ W1_e) @ W2_e
    (width 512, hidden 1024, fp32) into its rows of ``out``; the whole layer captured in one CUDA graph.

    Each expert's matmuls have a few dozen rows: a handful of thread blocks, a few µs of mostly latency,
    and its weights (4 MiB) to read. ``branches`` is how many streams the experts are dealt to during the
    capture. Work per call, both sides: 4 x tokens x 512 x 1024 FLOPs; bytes: the 32 MiB of weights, x
    and out. On a GPU, setup captures each expert alone in a graph of its own, times it (L2 flushed, the
    least of 3) and states the busiest stream's sum as the side's ceiling (``get_work()``): what its
    branches would take if they overlapped perfectly. The roofline does not bind chains of latency-bound
    kernels (chapter 11's concurrent_kernels states its ceiling the same way).
    """

    config = None  # the default device clock: both sides launch one graph; what differs is inside it
    branches = 1

    def prepare(self) -> None:
        ctx = context()
        count, most, width, hidden = ctx.size((8, 32, 512, 1024), (3, 6, 24, 40))
        self.bounds = ragged(count, most, offset=8)
        ctx.record("experts x tokens", f"{count}x{self.bounds[-1][1]}")
        self.x = randn(self.bounds[-1][1], width, offset=0)
        self.w1 = randn(count, width, hidden, offset=1, scale=1 / math.sqrt(width))
        self.w2 = randn(count, hidden, width, offset=2, scale=1 / math.sqrt(hidden))
        self.out = torch.empty_like(self.x)
        rows = self.x.shape[0]
        self.work = {
            "bytes": 4 * (self.w1.numel() + self.w2.numel()) + 8 * rows * width,
            "flops": 4 * rows * width * hidden,
        }
        self.lanes = side_streams(self.branches) if self.branches > 1 else [None]
        self.layer = Graph(self.experts)
        if ctx.is_cuda:  # the stated ceiling: the busiest stream's experts, each replayed alone
            busiest = busiest_lane_ms([Graph(self.expert(e)) for e in range(count)], self.branches)
            what = f"the busiest of its {self.branches} stream(s)' experts, each replayed alone in setup"
            self.work |= stated_ceiling(what, busiest)

    def expert(self, e: int) -> Callable[[], None]:
        """Expert ``e``'s MLP on its rows, as a call."""
        start, stop = self.bounds[e]
        return lambda: torch.mm(F.gelu(self.x[start:stop] @ self.w1[e]), self.w2[e], out=self.out[start:stop])

    def experts(self) -> None:
        fork(self.lanes)
        for e in range(len(self.bounds)):
            with on(self.lanes[e % len(self.lanes)]):
                self.expert(e)()
        join(self.lanes)

    def benchmark_fn(self) -> None:
        self.layer()


# --- training_step_graph --------------------------------------------------------------------------


class Mlp(torch.nn.Module):
    """Linear layers ``sizes[0] -> sizes[1] -> ... -> sizes[-1]`` (weights [in, out], biases) with GELU between
    them; fp32, trainable."""

    def __init__(self, sizes: Sequence[int], offset: int) -> None:
        super().__init__()
        shapes = list(zip(sizes[:-1], sizes[1:], strict=True))
        self.weights = torch.nn.ParameterList(
            randn(i, o, offset=offset + 2 * k, scale=1 / math.sqrt(i)) for k, (i, o) in enumerate(shapes)
        )
        self.biases = torch.nn.ParameterList(
            randn(o, offset=offset + 2 * k + 1, scale=0.1) for k, (_, o) in enumerate(shapes)
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        last = len(self.weights) - 1
        for k, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.addmm(b, h, w)
            if k < last:
                h = F.gelu(h)
        return h

    def flops_per_row(self) -> int:
        """Forward (2 per weight) and backward (the weights' gradients 2, the inputs' 2 except the first layer's)."""
        weights = [w.numel() for w in self.weights]
        return 6 * sum(weights) - 2 * weights[0]


class Training(Shell):
    """training_step_graph: 8 training steps of an MLP (256 -> 512 -> 512 -> 512 -> 256, GELU, fp32, 0.79 M
    parameters in 8 tensors) on batches of 32 rows: forward, mean-squared error against the batch's targets,
    backward, Adam (lr 1e-3, ``foreach=True``).

    Adam is ``capturable=True`` on both sides (on a GPU; a CPU has no graphs and Adam does not allow it
    there): its step counts and bias corrections live on the device, computed by kernels, where the default
    reads them on the host, which a graph could not replay. Each step copies its batch (``xs[i]``, ``ys[i]``)
    into the static buffers ``x`` and ``y``, runs ``advance()`` on them (which leaves the loss in ``loss``)
    and records the loss. Every call starts from the set-up state: parameters copied from ``init``, the
    optimizer's state zeroed in place (a fresh Adam's: zero moments, step 0), so every call does the same
    work and the two sides' outputs compare: the 8 losses and the update of every parameter (final minus
    initial, flattened; a skipped or wrong step changes the update by O(1), the final weights by a few per
    cent only).

    One step is ~45 kernels: the forward's 4 ``addmm`` and 3 GELUs, the loss, the backward's ~17 (two
    matmuls, a bias sum and a GELU backward per layer), Adam's ~17 multi-tensor ops, the loss's copy. Work
    per call, both sides: 8 x 32 rows x (6 x 0.79 M - 2 x 256 x 512) FLOPs (~1.2 GFLOP); bytes: Adam's 28 per
    parameter and step (read the weight, its gradient and both moments, write three) and the batches.
    """

    def prepare(self) -> None:
        ctx = context()
        batch, width, hidden, layers, self.steps = ctx.size((32, 256, 512, 4, 8), (5, 12, 20, 3, 3))
        ctx.record("batch x steps", f"{batch}x{self.steps}")
        self.model = Mlp((width, *[hidden] * (layers - 1), width), offset=10)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=1e-3, foreach=True, capturable=ctx.is_cuda)
        self.init = [p.detach().clone() for p in self.params]
        self.flat_init = torch.cat([p.reshape(-1) for p in self.init])
        self.xs = randn(self.steps, batch, width, offset=0)
        self.ys = randn(self.steps, batch, width, offset=1)
        self.x, self.y = self.xs[0].clone(), self.ys[0].clone()  # the static buffers every step reads
        self.loss = torch.empty((), device=ctx.device)
        self.out = (torch.empty(self.steps, device=ctx.device), torch.empty_like(self.flat_init))
        self.work = {
            "bytes": self.steps * (28 * self.flat_init.numel() + 4 * batch * 2 * width),
            "flops": self.steps * batch * self.model.flops_per_row(),
        }
        self.advance = self.stepper()

    def train_step(self) -> None:
        """One step on the static buffers. Gradients set to None first: the backward then writes each gradient
        afresh (in a capture: into buffers of the graph's own pool, which every replay rewrites) instead of
        adding to the last step's."""
        self.opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.loss.copy_(loss.detach())

    def stepper(self) -> Callable[[], None]:
        """What one training step costs the host: here eager, every kernel launched from Python."""
        return self.train_step

    def reset(self) -> None:
        """Back to the set-up state, in place (a captured graph reads and writes these very tensors)."""
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.init)
            zero_optimizer_state(self.opt)

    def benchmark_fn(self) -> None:
        losses, update = self.out
        self.reset()
        for i in range(self.steps):
            self.x.copy_(self.xs[i])
            self.y.copy_(self.ys[i])
            self.advance()
            losses[i].copy_(self.loss)
        with torch.no_grad():
            torch.cat([p.reshape(-1) for p in self.params], out=update).sub_(self.flat_init)

    def get_inputs(self) -> dict[str, Any]:
        """What a call reads: the snapshot it starts from and the batches. Parameters, gradients, optimizer
        state and the static buffers are scratch that every call overwrites first."""
        return {"init": self.init, "flat_init": self.flat_init, "xs": self.xs, "ys": self.ys}
