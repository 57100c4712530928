"""What every chapter-6 variant shares: seeded inputs, the benchmark shell, the kernels and the problem sizes.

A variant file holds only what its side does differently. Streaming working sets are sized relative to
the device's L2 (``ctx.working_set(l2=5)``: 250 MiB on an H100, 300 MiB on an H200) so every call streams
from HBM; the grid of ``grid_stride`` comes from the SM count. Smoke sizes keep the Triton interpreter
(CPU) to a few programs per call, with lengths that are no multiple of any block.

Kernels use Triton builtins only (``tl.histogram``, ``tl.atomic_add``, ``tl.exp``), not the
``@triton.jit`` helpers of ``triton.language.standard``: the harness's pre-warmed server imports Triton
before a CPU child sets TRITON_INTERPRET=1, so those helpers are compiled-mode functions the
interpreter refuses to call (see chapters/ch07/common.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from bench import BenchmarkConfig, context

Inputs = tuple[Any, torch.Tensor, dict[str, int]]  # operands, preallocated output, work counts
Launch = Callable[[Any, torch.Tensor], None]  # one call's work: read the operands, write out

# block_size: the baseline's launch configuration (CUDA's habitual 256 threads, one element each) and the
# candidates the optimized side's autotuner times on the GPU (elements per program, warps).
BASE_BLOCK, BASE_WARPS = 256, 8
TUNE_CONFIGS = ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (8192, 8))

# grid_stride: a 256-bin histogram of [LO, HI); values outside land in the edge bins.
BINS, LO, HI = 256, -4.0, 4.0
HIST_BLOCK = 512  # elements per loop step (4 warps: 4 per thread)
PROGRAMS_PER_SM = 16  # the persistent grid: 4 read 800 GB/s on the H100, 8 925, 16 1003 (histogram_probe)

LR = 0.01  # tiny_launches: out = p - LR * g


def generator(device: torch.device | None = None) -> torch.Generator:
    """A generator seeded with the run's seed, on ``device`` (the run's device by default)."""
    ctx = context()
    return torch.Generator(device=ctx.device if device is None else device).manual_seed(ctx.seed)


def randn(*shape: int, device: torch.device | None = None) -> torch.Tensor:
    """Fresh N(0, 1) fp32 values from a generator seeded with the run's seed: both sides draw alike."""
    dev = context().device if device is None else device
    return torch.randn(*shape, generator=generator(dev), device=dev)


def wall_clock() -> BenchmarkConfig:
    """timing_mode="cpu": perf_counter around each call, the device synchronized before start and stop.

    For pairs whose cost is on the host (launches, synchronous copies): the default clock replays each
    call as a CUDA graph, which is exactly what removes that cost.
    """
    return BenchmarkConfig(timing_mode="cpu")


class Example:
    """One variant: ``make()`` builds operands and output in setup; each call runs ``launch(operands, out)``.

    ``inputs(operands)``: which operands are inputs (the harness changes them to see the output follow);
    all of them by default. Scratch buffers and views of the inputs are not.
    """

    def __init__(
        self,
        make: Callable[[], Inputs],
        launch: Launch,
        config: BenchmarkConfig | None = None,
        inputs: Callable[[Any], Any] | None = None,
    ) -> None:
        self.make = make
        self.launch = launch
        self.config = config
        self.inputs = inputs

    def get_config(self) -> BenchmarkConfig | None:
        return self.config

    def setup(self) -> None:
        self.inp, self.out, self.work = self.make()

    def benchmark_fn(self) -> None:
        self.launch(self.inp, self.out)

    def teardown(self) -> None:
        del self.inp, self.out

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> Any:
        return self.inp if self.inputs is None else self.inputs(self.inp)

    def get_work(self) -> dict[str, int]:
        return self.work


def sm_count() -> int:
    """Streaming multiprocessors of the run's GPU (its logical cores on a CPU)."""
    facts = context().facts
    return facts.cores if facts is not None else 1


def stream() -> Inputs:
    """block_size, grid_stride: x of 5x L2 fp32 (250 MiB on an H100), read once per call."""
    ctx = context()
    n = ctx.working_set(l2=5, smoke=4 * (3 * 1024 + 7), name="x") // 4
    return randn(n), torch.empty(n, device=ctx.device), {"bytes": 8 * n}


# --- block_size ------------------------------------------------------------------------------------


@triton.jit
def silu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x * sigmoid(x) = x / (1 + exp(-x)), one BLOCK of elements per program."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(x_ptr + idx, mask=mask)
    tl.store(out_ptr + idx, x / (1.0 + tl.exp(-x)), mask=mask)


def silu_problem() -> Inputs:
    """block_size: out = silu(x) over ``stream()``'s x; 4 flops per element (exp counted as one)."""
    x, out, work = stream()
    return x, out, {**work, "flops": 4 * x.numel()}


def silu_launch(block: int, num_warps: int) -> Launch:
    def launch(x: torch.Tensor, out: torch.Tensor) -> None:
        n = out.numel()
        silu[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=num_warps)

    return launch


# --- grid_stride -----------------------------------------------------------------------------------


@triton.jit
def histogram(x_ptr, hist_ptr, n, lo, scale, BINS: tl.constexpr, BLOCK: tl.constexpr):
    """hist[b] += count of x in bin b (bin = (x - lo) * scale, clamped to [0, BINS)).

    Grid-stride: program p takes blocks p, p + P, p + 2P, ... (P programs), counts them into a private
    histogram in registers, and adds it to the global one once, at the end (BINS atomics per program).
    With one program per block (P = blocks) the loop runs once and every block pays that flush.
    """
    step = tl.num_programs(0) * BLOCK
    counts = tl.full([BINS], 0, tl.int32)
    for start in range(tl.program_id(0) * BLOCK, n, step):
        idx = start + tl.arange(0, BLOCK)
        mask = idx < n
        x = tl.load(x_ptr + idx, mask=mask, other=0.0)
        b = tl.minimum(tl.maximum(((x - lo) * scale).to(tl.int32), 0), BINS - 1)
        counts += tl.histogram(b, BINS, mask=mask)
    tl.atomic_add(hist_ptr + tl.arange(0, BINS), counts)


def histogram_problem() -> Inputs:
    """grid_stride: the histogram of ``stream()``'s x (int32 counts, exact on both sides)."""
    x, _, work = stream()
    return x, torch.empty(BINS, dtype=torch.int32, device=x.device), {**work, "bytes": 4 * x.numel() + 4 * BINS}


def block_programs(n: int) -> int:
    """One program per HIST_BLOCK elements."""
    return triton.cdiv(n, HIST_BLOCK)


def persistent_programs(n: int) -> int:
    """PROGRAMS_PER_SM per SM (2 at smoke size, so the interpreter runs the loop), never more than blocks."""
    return min(block_programs(n), context().size(sm_count() * PROGRAMS_PER_SM, 2))


def histogram_launch(programs: Callable[[int], int]) -> Launch:
    """Zero the counts, then launch ``histogram`` on ``programs(n)`` programs (both sides zero alike)."""

    def launch(x: torch.Tensor, hist: torch.Tensor) -> None:
        n = x.numel()
        hist.zero_()
        histogram[(programs(n),)](x, hist, n, LO, BINS / (HI - LO), BINS=BINS, BLOCK=HIST_BLOCK, num_warps=4)

    return launch


# --- tiny_launches ---------------------------------------------------------------------------------


def parameter_set() -> Inputs:
    """tiny_launches: 512 parameter tensors of 4 Ki-64 Ki fp32 elements (seeded sizes), their gradients, and
    the updated values out = p - LR * g; every tensor a view into one flat buffer, on both sides (as an
    optimizer that keeps its parameters flat would).

    Operands: (flat p, flat g, the per-tensor views of p, of g and of out). Work: read p and g, write out
    (12 B per element), 2 flops per element.
    """
    ctx = context()
    count, lo, hi = ctx.size((512, 4096, 65536), (7, 3, 700))
    sizes = torch.randint(lo, hi + 1, (count,), generator=torch.Generator().manual_seed(ctx.seed)).tolist()
    n = sum(sizes)
    ctx.record("tensors", count)
    pg = randn(2 * n)
    p, g, out = pg[:n], pg[n:], torch.empty(n, device=pg.device)
    views = tuple(list(t.split(sizes)) for t in (p, g, out))
    return (p, g, *views), out, {"bytes": 12 * n, "flops": 2 * n}


def flat_inputs(operands: tuple[Any, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """tiny_launches' inputs: the flat p and g (their views alias them)."""
    return operands[0], operands[1]


# --- prefetch --------------------------------------------------------------------------------------


def host_array() -> Inputs:
    """prefetch: 64 Mi fp32 (256 MiB) in ordinary pageable host memory, needed on the device by one
    elementwise op (out = x * 2 + 1 there).

    Operands: (x on the host, the device buffer it moves to, the first-touch page: 16 Ki fp32 = 64 KiB,
    the unified-memory driver's basic migration block; the prefetch piece: 4 Mi fp32 = 16 MiB). Smoke
    sizes keep several pages and pieces, the last ones partial. Work: the bytes that cross to the device,
    2 flops per element.
    """
    ctx = context()
    n, page, piece = ctx.size((64 * 2**20, 16384, 4 * 2**20), (3 * 3000 + 7, 1000, 4000))
    x = randn(n, device=torch.device("cpu"))
    dev, out = torch.empty(n, device=ctx.device), torch.empty(n, device=ctx.device)
    return (x, dev, page, piece), out, {"bytes": 4 * n, "flops": 2 * n}


def host_input(operands: tuple[Any, ...]) -> torch.Tensor:
    """prefetch's input: the host array (the device buffer is scratch)."""
    return operands[0]


def finish(dev: torch.Tensor, out: torch.Tensor) -> None:
    """The op that needs the data on the device: out = dev * 2 + 1."""
    torch.mul(dev, 2.0, out=out).add_(1.0)


# --- async_launches --------------------------------------------------------------------------------

STEPS, DECAY = 64, 0.5  # async_launches: STEPS kernels, each out = x + DECAY * (x, then out)


def decay_chain() -> Inputs:
    """async_launches: x of 4 Mi fp32 (16 MiB) and out; STEPS kernels (``decay_step``), each reading the one
    before's output, as a model's layers do: out = x (1 + DECAY + ... + DECAY^STEPS). 16 MiB + 16 MiB fit in an
    H100's 50 MiB L2, so back-to-back kernels are served partly from it. Smoke: a length no multiple of any
    block.

    Work: STEPS kernels, each reading x and the previous output and writing out (12 B per element), 2 flops
    per element: the sequence's traffic (its closed form would take one pass; the pair is about the sequence).
    """
    n = context().size(4 * 2**20, 3 * 1024 + 7)
    x = randn(n)
    return x, torch.empty_like(x), {"bytes": 12 * n * STEPS, "flops": 2 * n * STEPS}


def decay_step(x: torch.Tensor, prev: torch.Tensor, out: torch.Tensor) -> None:
    """One kernel: out = x + DECAY * prev (``prev`` may be ``out`` itself: elementwise, in place)."""
    torch.add(x, prev, alpha=DECAY, out=out)


def synchronize(device: torch.device) -> None:
    """torch.cuda.synchronize() on a GPU: the host waits until the device has run everything queued. A CPU
    runs each op before returning, so there is nothing to wait for."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
