"""What every chapter-2 variant shares: seeded inputs, the benchmark shell, the kernels and the problem sizes.

A variant file holds only what its side does differently. Sizes that depend on the hardware are asked
of the harness relative to the device (``ctx.working_set(l2=...)``, ``ctx.facts.cores``), so a pair means
the same on an H100 (50 MiB L2, 132 SMs) and an H200 (60 MiB L2, 132 SMs); the sizes used land in the
result. Smoke sizes keep the Triton interpreter (CPU) to a few programs per call, with lengths that are
no multiple of any block so every mask is exercised.

Work counts (``get_work()``) are the same on both sides of a pair; what each side really moves is in its
docstring and in README.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from bench import BenchmarkConfig, context

BLOCK = 1024  # elements per program of the one-pass elementwise kernel (4 warps: 8 fp32 per thread)

# l2_blocking: one pass maps x -> x - C2 * x * |x| + C1 (bounded for the N(0, 1) inputs: it contracts
# towards sqrt(C1 / C2)), PASSES times. Nonlinear on purpose: no chain of passes folds into one.
RELAX_C1, RELAX_C2 = 0.1, 0.05
PASSES = 8

# waves: every element runs ITER steps of z = z * WAVE_A + WAVE_B (an FMA each) in a program that owns a
# contiguous range, TILE elements at a time. 16 warps x 8 fp32 per thread: one program keeps all four
# schedulers of its SM issuing independent FMAs, so a second program on the same SM halves both.
TILE = 4096
WAVE_WARPS = 16
WAVE_A, WAVE_B = 0.999, 0.001

Inputs = tuple[Any, torch.Tensor, dict[str, int]]  # operands, preallocated output, work counts
Launch = Callable[[Any, torch.Tensor], None]  # one call's work: read the operands, write out


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

    For pairs whose cost is on the host or the host link (copies from host memory, copies between GPUs):
    CUDA events on one stream see neither a copy that blocks the host nor work on the other GPU.
    """
    return BenchmarkConfig(timing_mode="cpu")


def two_gpus() -> BenchmarkConfig:
    """peer_copy: the wall clock, in one process that sees two GPUs (``gpus=2``: with a worker per GPU, it runs
    alone on the host and sees both)."""
    return BenchmarkConfig(timing_mode="cpu", gpus=2)


class Example:
    """One variant: ``make()`` builds operands and output in setup; each call runs ``launch(operands, out)``."""

    def __init__(self, make: Callable[[], Inputs], launch: Launch, config: BenchmarkConfig | None = None) -> None:
        self.make = make
        self.launch = launch
        self.config = config

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

    def get_work(self) -> dict[str, int]:
        return self.work


# --- l2_blocking ---------------------------------------------------------------------------------------


@triton.jit
def relax(src_ptr, dst_ptr, n, c1, c2, BLOCK: tl.constexpr):
    """One pass: dst = x - c2 * x * |x| + c1 with x = src, one BLOCK per program; src may be dst (in place)."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(src_ptr + idx, mask=mask)
    tl.store(dst_ptr + idx, x - c2 * x * tl.abs(x) + c1, mask=mask)


def relax_pass(src: torch.Tensor, dst: torch.Tensor) -> None:
    """One pass of ``relax`` over dst's elements (one launch)."""
    n = dst.numel()
    relax[(triton.cdiv(n, BLOCK),)](src, dst, n, RELAX_C1, RELAX_C2, BLOCK=BLOCK, num_warps=4)


def relax_problem() -> Inputs:
    """l2_blocking: x of 8x L2 (400 MiB fp32 on an H100, 480 MiB on an H200), PASSES passes, chunks of L2 / 4.

    Operands: (x, chunk length in elements, passes). Work per call: every pass reads and writes every
    element, 8 B x PASSES per element wherever the bytes are served from (the pair is about *where*), and
    4 flops per element per pass.
    """
    ctx = context()
    n = ctx.working_set(l2=8, smoke=4 * (5 * BLOCK + 300), name="working_set") // 4  # smoke: 6 programs
    chunk = ctx.working_set(l2=0.25, smoke=4 * (BLOCK + 76), name="chunk") // 4  # smoke: 5 chunks, the last short
    x = randn(n)
    work = {"bytes": PASSES * 8 * n, "flops": PASSES * 4 * n}
    return (x, chunk, PASSES), torch.empty_like(x), work


# --- waves ---------------------------------------------------------------------------------------------


@triton.jit
def iterate_range(x_ptr, out_ptr, n, per_program, iters, a, b, TILE: tl.constexpr):
    """out = f^iters(x), f(z) = z * a + b; program p owns elements [p * per_program, (p + 1) * per_program)."""
    start = tl.program_id(0) * per_program
    end = tl.minimum(start + per_program, n)
    for off in range(start, end, TILE):
        idx = off + tl.arange(0, TILE)
        mask = idx < end
        z = tl.load(x_ptr + idx, mask=mask, other=0.0)
        for _ in range(iters):
            z = z * a + b
        tl.store(out_ptr + idx, z, mask=mask)


def iterate_launch(inp: tuple[torch.Tensor, int, int], out: torch.Tensor) -> None:
    """Both sides of ``waves``: the same kernel; only ``per_program`` (hence the grid) differs."""
    x, per_program, iters = inp
    n = x.numel()
    grid = (triton.cdiv(n, per_program),)
    iterate_range[grid](x, out, n, per_program, iters, WAVE_A, WAVE_B, TILE=TILE, num_warps=WAVE_WARPS)


def sm_count() -> int:
    """Streaming multiprocessors of the run's GPU (its logical cores on a CPU)."""
    facts = context().facts
    return facts.cores if facts is not None else 1


def wave_programs(n: int, programs: int) -> int:
    """Elements per program, a whole number of TILEs, so that ``n`` needs at most ``programs`` programs."""
    return triton.cdiv(triton.cdiv(n, programs), TILE) * TILE


def wave_problem(full_wave: bool) -> Inputs:
    """waves: n = (SMs + 1) x 107 tiles of 4096 fp32 (58.3 M elements, 233 MB on an H100), 512 FMAs each.

    ``full_wave`` False: programs of 107 tiles, the size the work came in: SMs + 1 programs. True: the same
    elements split over exactly SMs programs (each 1/SMs more work). Operands: (x, elements per program,
    iterations). Work: 2 flops per FMA, x read and out written once (8 B per element).
    """
    ctx = context()
    sms = ctx.record("sms", sm_count())
    tiles = ctx.size(107, 2)  # full: ~1 ms per program at an SM's fp32 FMA rate
    iters = ctx.size(512, 5)
    n = (sms + 1) * tiles * TILE - ctx.size(0, 37)  # smoke: the last program's last tile is partial
    per_program = wave_programs(n, sms) if full_wave else tiles * TILE
    ctx.record("programs", triton.cdiv(n, per_program))
    x = randn(n)
    return (x, per_program, iters), torch.empty_like(x), {"bytes": 8 * n, "flops": 2 * iters * n}


# --- tensor_cores --------------------------------------------------------------------------------------


def product() -> Inputs:
    """tensor_cores: C = A @ B, 8192^3, fp32 operands in, the product delivered in bf16.

    Work: 2MNK flops; bytes: the fp32 operands read and the bf16 result written once, 4(MK + KN) + 2MN.
    """
    m, n, k = context().size((8192, 8192, 8192), (67, 45, 83))
    ab = randn(m * k + k * n)  # one draw: two draws from the same seed would repeat their values
    a, b = ab[: m * k].view(m, k), ab[m * k :].view(k, n).clone()
    work = {"bytes": 4 * (m * k + k * n) + 2 * m * n, "flops": 2 * m * n * k}
    return (a, b), torch.empty(m, n, dtype=torch.bfloat16, device=a.device), work


def fp32_product(inp: tuple[torch.Tensor, torch.Tensor], out: torch.Tensor) -> None:
    """tensor_cores' fp32 sides: torch.mm on the fp32 operands (CUDA cores or TF32 tensor cores, as the float32
    matmul precision says), the product rounded into the bf16 output."""
    a, b = inp
    out.copy_(torch.mm(a, b))


class Fp32Product(Example):
    """An fp32 side of tensor_cores: ``torch.set_float32_matmul_precision(precision)`` in setup ("highest": CUDA
    cores; "high": TF32 tensor cores), so the run's manifest (read after setup) records what the variant ran with;
    the previous setting restored in teardown. ``dtype``: the matmul peak the FLOPs are judged against when it is
    not the output's (bf16)."""

    def __init__(self, precision: str, dtype: str | None = None, config: BenchmarkConfig | None = None) -> None:
        super().__init__(product, fp32_product, config)
        self.precision, self.dtype = precision, dtype

    def setup(self) -> None:
        self.saved_precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(self.precision)
        super().setup()

    def teardown(self) -> None:
        super().teardown()
        torch.set_float32_matmul_precision(self.saved_precision)

    def get_work(self) -> dict[str, Any]:
        return {**self.work, "dtype": self.dtype} if self.dtype else self.work


# --- pinned_copy ---------------------------------------------------------------------------------------


def host_tensor(pinned: bool) -> Inputs:
    """pinned_copy: 64 Mi fp32 (256 MiB) in host memory, page-locked when ``pinned`` and a GPU runs, and
    the device buffer it is copied to. Work: the bytes crossing the host link once."""
    ctx = context()
    n = ctx.size(64 * 2**20, 3 * BLOCK + 7)
    src = randn(n, device=torch.device("cpu"))
    if pinned and ctx.is_cuda:
        src = src.pin_memory()  # cudaHostAlloc: the copy engine reads it directly (DMA)
    ctx.record("host_memory", "pinned" if src.is_pinned() else "pageable")
    return src, torch.empty(n, device=ctx.device), {"bytes": 4 * n}


# --- peer_copy -----------------------------------------------------------------------------------------


def peer_buffers() -> Inputs:
    """peer_copy: 256 Mi fp32 (1 GiB) on this GPU and the buffer on the next GPU it is copied to.

    Needs two GPUs (the variant is skipped with that reason otherwise). Work: the bytes delivered once.
    """
    ctx = context()
    ctx.require(gpus=2)
    n = ctx.size(256 * 2**20, 3 * BLOCK + 7)
    assert ctx.facts is not None  # require() read them
    peer = torch.device("cuda", ((ctx.device.index or 0) + 1) % ctx.facts.count)
    ctx.record("peer", str(peer))
    return randn(n), torch.empty(n, device=peer), {"bytes": 4 * n}
