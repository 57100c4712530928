"""What every chapter-1 variant shares: seeded inputs, the benchmark shells, the problem sizes.

A variant file holds only what its side does differently. ``Example`` supplies setup, teardown,
the output the harness compares and the work counts for a ``launch(*operands, out)`` function;
``TrainingStep`` does the same for the training loop, whose variants differ only in how a batch
reaches the device. Work counts are the *minimum* a call needs (unique bytes, useful FLOPs) and
are the same on both sides of a pair, so achieved GB/s and TFLOP/s compare useful throughput;
what the slower side really moves is in its docstring and in README.md.

Full sizes are meant for an H100 (L2 50 MB); smoke sizes keep every variant, the Triton kernel
through the interpreter included, to milliseconds on a CPU, with lengths that are not multiples
of any block or batch so every edge is exercised.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from bench import BenchmarkConfig, context, time_alone

BLOCK = 1024  # elements per program of the fused elementwise kernel
A, B, C = 1.5, -0.25, 0.75  # fusion: out = relu(x * A + B) * C

Inputs = tuple[tuple[Any, ...], torch.Tensor, dict[str, int]]  # operands, preallocated output, work
Launch = Callable[..., None]  # launch(*operands, out): one call's work, written into out


def generator(offset: int = 0, device: torch.device | None = None) -> torch.Generator:
    """A generator seeded with the run's seed + ``offset`` (distinct streams for distinct tensors)."""
    ctx = context()
    return torch.Generator(device=ctx.device if device is None else device).manual_seed(ctx.seed + offset)


def randn(*shape: int, offset: int = 0, scale: float = 1.0) -> torch.Tensor:
    """Fresh N(0, scale²) fp32 values on the run's device."""
    x = torch.randn(*shape, generator=generator(offset), device=context().device)
    return x.mul_(scale) if scale != 1.0 else x


def wall_clock() -> BenchmarkConfig:
    """timing_mode="cpu": perf_counter around each call, device synchronized before start and stop.

    For pairs whose cost lives on the host (launches, syncs, host-side batch preparation): the
    default cuda_event clock queues the call behind a spin kernel so host gaps stay out of the
    sample, which would hide exactly what these optimizations remove.
    """
    return BenchmarkConfig(timing_mode="cpu")


# event_times_ms queues each start event behind a spin kernel of this many GPU cycles (~1 ms at Hopper's ~2 GHz):
# the host enqueues the call while the device spins, so the time between the events is the device's alone, not the
# host's launch (a compiled or Python-heavy call can take hundreds of µs to enqueue), as the harness times.
SPIN_CYCLES = 2_000_000


def event_times_ms(fn: Callable[[], Any], calls: int, flush: torch.Tensor | None = None) -> list[float]:
    """``fn``'s device work alone on the current stream, ``calls`` times, in ms between CUDA events, after one
    untimed call (a warm-up, or a compile); each after reading ``flush`` when given (a buffer of twice the L2:
    clean lines, no write-back inside the timing, as the harness flushes), the start queued behind a spin kernel
    (``SPIN_CYCLES``) that hides the host's launch. For the probes (scripts/timing), which want every sample; a
    chapter's setup times a part of its call with ``bench.time_alone``, the harness's own clock."""
    fn()
    times = []
    for _ in range(calls):
        if flush is not None:
            flush.sum()
        torch.cuda._sleep(SPIN_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def median_us(fn: Callable[[], Any], flush: torch.Tensor | None, calls: int = 50) -> float:
    """The median of ``event_times_ms(fn, calls, flush)``, in µs: a probe's time for one configuration."""
    return statistics.median(event_times_ms(fn, calls, flush)) * 1e3


def timed_row(cells: Sequence[object], fn: Callable[[], Any], rate: Callable[[float], str],
              flush: torch.Tensor | None, calls: int = 30) -> float | None:  # fmt: skip
    """Print a probe's Markdown row: ``cells``, ``fn``'s ``median_us`` and ``rate(µs)``; or ``failed`` with the
    error where ``fn`` raises (a tile that does not compile is a row, not the end of the probe). The µs, or None."""
    head = " | ".join(str(c) for c in cells)
    try:
        us = median_us(fn, flush, calls)
    except Exception as exc:  # noqa: BLE001 - any failure of one configuration is that row's result
        print(f"| {head} | failed: {type(exc).__name__}: {str(exc)[:80]} | |")
        return None
    print(f"| {head} | {us:.1f} | {rate(us)} |")
    return us


def flush_buffer() -> torch.Tensor:
    """A buffer of twice the device's L2 (``event_times_ms``'s ``flush``)."""
    ctx = context()
    return torch.ones(2 * ctx.facts.l2_bytes // 4 + 1, device=ctx.device)


def busiest_lane_ms(calls: Sequence[Callable[[], Any]], lanes: int) -> float:
    """``calls`` dealt to ``lanes`` streams in turn (call i to lane i % lanes), each timed alone (L2 flushed,
    the least of 3): the busiest lane's sum, what the lanes would take if they overlapped perfectly."""
    alone = [time_alone(call) for call in calls]
    return max(sum(alone[i::lanes]) for i in range(lanes))


def zero_optimizer_state(opt: torch.optim.Optimizer) -> None:
    """Zero every tensor of ``opt``'s state in place: a fresh Adam's or SGD's (zero moments, step 0), for a
    training benchmark that starts each call where setup left it. One multi-tensor op per device (fused and
    capturable Adam keep ``step`` on the GPU, the others on the host); nothing before the first step."""
    state = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    for device in {t.device for t in state}:
        torch._foreach_zero_([t for t in state if t.device == device])


def stated_ceiling(what: str, ms: float, target_pct: float = 80.0) -> dict[str, Any]:
    """The fields ``get_work()`` adds to state a ceiling the roofline does not know: its name in words, the
    least time a call can take under it, and the share of it the optimized side is to reach."""
    return {"ceiling": what, "ceiling_ms": ms, "ceiling_target_pct": target_pct}


class Example:
    """One variant: ``make()`` builds operands and output in setup; each call runs ``launch(*operands, out)``."""

    def __init__(self, make: Callable[[], Inputs], launch: Launch, config: BenchmarkConfig | None = None) -> None:
        self.make = make
        self.launch = launch
        self.config = config

    def get_config(self) -> BenchmarkConfig | None:
        return self.config

    def setup(self) -> None:
        self.args, self.out, self.work = self.make()

    def benchmark_fn(self) -> None:
        self.launch(*self.args, self.out)

    def teardown(self) -> None:
        del self.args, self.out

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_work(self) -> dict[str, int]:
        return self.work


# --- problems: one function per pair, shared by its two sides ---------------------------------


def linear_layer() -> Inputs:
    """batch_size: 2048 samples of 4096 features through one Linear(4096 -> 8192) (W: 128 MiB).

    Minimum traffic: read x (4SK) + W (4KN) + b (4N), write out (4SN); 2SKN FLOPs.
    """
    s, k, n = context().size((2048, 4096, 8192), (60, 48, 40))  # smoke: 60 = 7 batches of 8 + 4
    x = randn(s, k, offset=0)
    w = randn(n, k, offset=1, scale=1 / math.sqrt(k))  # nn.Linear's layout: [out_features, in_features]
    b = randn(n, offset=2, scale=0.1)
    work = {"bytes": 4 * (s * k + k * n + n + s * n), "flops": 2 * s * k * n}
    return (x, w.t(), b), torch.empty(s, n, device=x.device), work


def matrix_batch() -> Inputs:
    """batched_gemm: 1024 independent 128 x 128 products (a, b, out: 64 MiB each).

    Minimum traffic: read a and b, write out, 4 bytes each; 2 * count * m * k * p FLOPs.
    """
    count, m, k, p = context().size((1024, 128, 128, 128), (12, 9, 11, 7))
    a = randn(count, m, k, offset=0)
    b = randn(count, k, p, offset=1)
    work = {"bytes": 4 * count * (m * k + k * p + m * p), "flops": 2 * count * m * k * p}
    return (a, b), torch.empty(count, m, p, device=a.device), work


def vector() -> Inputs:
    """fusion: x of 64 Mi fp32 (256 MiB); minimum traffic read x + write out = 8 B, 4 FLOPs per element."""
    x = randn(context().size(64 * 2**20, 3 * BLOCK + 7))  # smoke: 4 programs, the last one partial
    n = x.numel()
    return (x,), torch.empty_like(x), {"bytes": 8 * n, "flops": 4 * n}


def layer_stack() -> Inputs:
    """cuda_graph: a batch of 64 through 32 layers of 256 x 256, tanh after each (weights: 8 MiB).

    Each op is a few microseconds of GPU work: 65 kernels per call, launch-bound in eager mode.
    Minimum traffic: read x and the weights, write out; 2 * layers * batch * width² FLOPs.
    """
    batch, width, layers = context().size((64, 256, 32), (5, 24, 6))
    x = randn(batch, width, offset=0)
    ws = randn(layers, width, width, offset=1, scale=1 / math.sqrt(width))  # keeps activations O(1)
    work = {"bytes": 4 * (2 * batch * width + layers * width * width), "flops": 2 * layers * batch * width * width}
    return (x, ws), torch.empty_like(x), work


def tanh_layers(x: torch.Tensor, ws: torch.Tensor, out: torch.Tensor) -> None:
    """cuda_graph, both sides: h = tanh(h @ w) for each layer, then out = h (2 * layers + 1 kernels)."""
    h = x
    for w in ws:
        h = torch.tanh(h @ w)
    out.copy_(h)


def recurrence() -> Inputs:
    """goodput: 16 steps of h = tanh(h @ W_n) on a batch of 256, width 4096 (W: 64 MiB).

    Useful work: 16 * 2 * batch * width² FLOPs (the matmuls); minimum traffic: read h0 and W, write out.
    """
    batch, width, steps = context().size((256, 4096, 16), (6, 24, 4))
    h0 = randn(batch, width, offset=0)
    w = randn(width, width, offset=1)
    work = {"bytes": 4 * (2 * batch * width + width * width), "flops": steps * 2 * batch * width * width}
    return (h0, w, steps), torch.empty_like(h0), work


def normalized(w: torch.Tensor) -> torch.Tensor:
    """goodput's constant: W scaled so that h @ W_n keeps h's scale (‖W_n‖_F = sqrt(width))."""
    return w * (math.sqrt(w.shape[0]) / torch.linalg.vector_norm(w))


def check_finite(h: torch.Tensor) -> None:
    """goodput's health check; ``.item()`` copies to the host, so the host waits for the GPU to drain."""
    worst = h.abs().max().item()
    if not math.isfinite(worst):
        raise FloatingPointError(f"recurrence diverged: max |h| = {worst}")


def positive_means() -> Inputs:
    """hidden_sync: 64 steps of h = tanh(h @ W) on a batch of 256, width 2048 (W: 16 MiB), and after each step a
    statistic of h, the mean of its positive entries, into ``out[step]`` (a training loop's logged metric).

    Operands: (h0, W, steps). Useful work: the matmuls, steps x 2 x batch x width² FLOPs; minimum traffic: read h0
    and W, write out. On a GPU the stated ceiling is the sync-free call's device time alone (``time_alone``: one
    CUDA-graph replay, no host in it): what a call costs when nothing on the host holds the GPU back.
    """
    ctx = context()
    batch, width, steps = ctx.size((256, 2048, 64), (6, 24, 5))
    h0 = randn(batch, width, offset=0)
    w = randn(width, width, offset=1, scale=1.5 / math.sqrt(width))  # gain 1.5: tanh keeps h away from 0 and +-1
    out = torch.empty(steps, device=h0.device)
    work: dict[str, Any] = {"bytes": 4 * (batch * width + width * width + steps), "flops": steps * 2 * batch * width**2}
    if ctx.is_cuda:
        scratch = torch.empty_like(out)
        what = "the sync-free call's kernels back to back on the device, timed alone in setup (no host gap)"
        work |= stated_ceiling(what, time_alone(lambda: positive_means_on_device(h0, w, steps, scratch)))
    return (h0, w, steps), out, work


def positive_means_on_device(h0: torch.Tensor, w: torch.Tensor, steps: int, out: torch.Tensor) -> None:
    """hidden_sync, optimized: each step's mean of positive entries as a masked sum over a count, both on the
    device (fixed shapes: no output whose size the host must learn first)."""
    h = h0
    for i in range(steps):
        h = torch.tanh(h @ w)
        pos = h > 0
        torch.div(torch.where(pos, h, 0.0).sum(), pos.sum(), out=out[i])


def gemv_batch() -> Inputs:
    """roofline: 32 vectors (one per request: a decode step) through one bf16 weight W of 16 384 x 8192 (256 MiB,
    over 4x the L2 of an H100 or H200), y_i = W x_i.

    Operands: (X, W) with X of 32 x 8192. Minimum traffic: read W and X once, write Y: 2 B per element;
    2 x 32 x 16 384 x 8192 = 8.6 GFLOP. Intensity at that minimum: ~32 FLOP/B (2 FLOPs per 2-byte weight element
    per vector); read once per vector, as 32 matrix-vector products do, W's bytes make it ~1 FLOP/B.
    """
    m, n, k = context().size((32, 16384, 8192), (5, 40, 24))
    x = randn(m, k, offset=0).bfloat16()
    w = randn(n, k, offset=1, scale=1 / math.sqrt(k)).bfloat16()
    work = {"bytes": 2 * (n * k + m * k + m * n), "flops": 2 * m * n * k}
    return (x, w), torch.empty(m, n, device=x.device, dtype=torch.bfloat16), work


# --- training_step --------------------------------------------------------------------------


class TrainingStep:
    """``steps`` SGD steps of a 2-layer MLP per call, each call from the same initial weights.

    Sizes (full): 8 steps of 1024 samples x 4096 features, hidden 512, 16 classes. The dataset
    (128 MiB of features, seeded) sits in ordinary pageable host memory, as a loader produces it;
    subclasses say how step ``i``'s batch reaches the device (``load``). Every call first copies
    the initial weights back, so all calls do the same work and the last call's output (per-step
    losses and final weights) is comparable between the two sides.
    """

    lr = 0.05

    def get_config(self) -> BenchmarkConfig:
        # The baseline's cost is host work and host-blocking copies: time the wall clock.
        return wall_clock()

    def setup(self) -> None:
        ctx = context()
        self.device = ctx.device
        self.steps, batch, d_in, hidden, classes = ctx.size((8, 1024, 4096, 512, 16), (3, 20, 40, 24, 10))
        host = generator(100, torch.device("cpu"))
        self.host_x = torch.randn(self.steps, batch, d_in, generator=host)
        self.host_y = torch.randint(classes, (self.steps, batch), generator=host)
        self.init = [
            randn(hidden, d_in, offset=1, scale=1 / math.sqrt(d_in)),
            randn(hidden, offset=2, scale=0.1),
            randn(classes, hidden, offset=3, scale=1 / math.sqrt(hidden)),
            randn(classes, offset=4, scale=0.1),
        ]
        self.params = [p.clone().requires_grad_() for p in self.init]
        self.opt = torch.optim.SGD(self.params, lr=self.lr)
        self.losses = torch.empty(self.steps, device=self.device)
        self.work = {
            # Host-to-device bytes (features + int64 labels): the traffic this pair is about.
            "bytes": self.steps * batch * (4 * d_in + 8),
            # Matmuls only: layer 1 forward + weight gradient (the input needs no gradient), layer 2 all three.
            "flops": self.steps * (4 * batch * d_in * hidden + 6 * batch * hidden * classes),
        }
        self.prepare()

    def prepare(self) -> None:
        """Allocate what ``load`` reuses (called at the end of setup)."""

    def load(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Step ``step``'s (features, labels) on the device."""
        raise NotImplementedError

    def benchmark_fn(self) -> None:
        with torch.no_grad():
            for p, p0 in zip(self.params, self.init, strict=True):
                p.copy_(p0)
        w1, b1, w2, b2 = self.params
        for i in range(self.steps):
            x, y = self.load(i)
            loss = F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            self.losses[i] = loss.detach()  # a device-side copy: no host sync

    def teardown(self) -> None:
        del self.host_x, self.host_y, self.init, self.params, self.opt, self.losses

    def get_output(self) -> tuple[torch.Tensor, ...]:
        return (self.losses, *(p.detach() for p in self.params))

    def get_work(self) -> dict[str, int]:
        return self.work


def cuda_driver() -> Any:
    """``cuda.bindings.driver``, the CUDA driver API (managed memory, graphs), imported when first needed."""
    from cuda.bindings import driver

    return driver


def driver_ok(result: Any, what: str) -> Any:
    """A driver call's (CUresult, values...): its value (or values, or None), else a RuntimeError naming the call."""
    status, *values = result
    if int(status) != 0:
        raise RuntimeError(f"{what} failed: {status!r}")
    return values[0] if len(values) == 1 else values or None


class CudaExample(Example):
    """A CUDA C++ variant: setup() loads ``kernel`` from ``source`` (``bench.cuda_source``; on a host without a GPU
    the variant is skipped there, before anything is allocated), then builds the operands; each call runs
    ``launch(kernel, *operands, out)``."""

    def __init__(self, source: Any, kernel: str, make: Callable[[], Inputs], launch: Launch,
                 config: BenchmarkConfig | None = None) -> None:  # fmt: skip
        super().__init__(make, launch, config)
        self.source, self.kernel_name = source, kernel

    def setup(self) -> None:
        self.kernel = self.source.kernel(self.kernel_name)
        super().setup()

    def benchmark_fn(self) -> None:
        self.launch(self.kernel, *self.args, self.out)
