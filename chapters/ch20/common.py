"""What every chapter-20 variant shares: two Triton kernels, their configuration spaces, and the search.

Each pair runs one kernel twice: the baseline with a hand-picked configuration (block sizes, warps,
pipeline stages: what a programmer writes once and keeps), the optimized side with the configuration a
search picked on the device that runs it. The search is Triton's autotuner (``triton.autotune``): every
configuration that survives a pruning rule is compiled and timed with ``triton.testing.do_bench`` on the
problem's own shape, and the fastest is kept. It runs once, in ``setup()`` (as an application tunes once,
at start-up or offline), never in the timed calls, and its cost is recorded beside the gain, in the
result's sizes:

* ``search_s``: wall seconds of the search (compiling every candidate, then timing it);
  ``search_compile_s``: the compiling part (a GPU compiles; the CPU interpreter does not);
* ``configs_in_space``, ``configs_timed``: the space, and what was left of it after pruning;
* ``config``: the configuration chosen; ``default_in_search_ms``, ``best_in_search_ms``: the search's own
  timing of the hand default (always in the space) and of the winner; ``search_gain`` their ratio;
* ``break_even_calls``: calls the winner needs to win back the search's seconds (search_s over the time it
  saves per call, by the search's own timings).

The harness's measurement is the verdict; the search's timings are its estimate, recorded so a reader can
compare the two. On a CPU the kernels run in Triton's interpreter, where num_warps and num_stages mean
nothing and every timing is the interpreter's: the search runs (timed with ``time.perf_counter``) and is
recorded, and the pair's verification is what the CPU run checks.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from bench import BenchmarkConfig, context

# tl.sum's combine function. Kernels here call builtins only: triton.language.standard's @triton.jit helpers
# (tl.sum, tl.cdiv, tl.zeros) stay compiled-mode functions in a process that imported Triton before
# TRITON_INTERPRET=1 was set (the chapter tests), and the interpreter refuses to call them; it recognises this
# combine function and reduces with numpy without calling it (chapters/ch19/common.py).
add = tl.standard._sum_combine

SMEM_LIMIT = 227 * 1024  # bytes of shared memory one program may use on sm_90
ACC_REGS = 128  # fp32 accumulator values per thread above which a tile spills on sm_90 (ch08's register_pressure)


def generator(offset: int = 0) -> torch.Generator:
    """A generator on the run's device seeded with the run's seed + ``offset``: both sides draw alike."""
    ctx = context()
    return torch.Generator(device=ctx.device).manual_seed(ctx.seed + offset)


def randn(*shape: int, offset: int = 0, scale: float = 1.0) -> torch.Tensor:
    """Fresh N(0, scale²) bf16 values on the run's device (drawn in fp32)."""
    x = torch.randn(*shape, generator=generator(offset), device=context().device)
    return (x.mul_(scale) if scale != 1.0 else x).bfloat16()


def interpreted(kernel: Any) -> bool:
    """True when ``kernel`` runs in Triton's CPU interpreter (TRITON_INTERPRET=1 when it was decorated)."""
    return not isinstance(kernel, triton.runtime.jit.JITFunction)


def describe(config: triton.Config) -> str:
    """``BLOCK_M=128 BLOCK_N=256 ... num_warps=8 num_stages=3``: a configuration as the result records it."""
    kw = " ".join(f"{k}={v}" for k, v in config.kwargs.items())
    return f"{kw} num_warps={config.num_warps} num_stages={config.num_stages}"


# --- the search --------------------------------------------------------------------------------------


def cpu_bench(kernel_call: Callable[[], None], quantiles: Sequence[float] | None = None) -> Any:
    """The autotuner's timer on a CPU (``do_bench`` needs CUDA): one call to warm up, then the median of three
    ``time.perf_counter`` spans, and [median, min, max] where Triton asks for quantiles."""
    kernel_call()
    spans = []
    for _ in range(3):
        t0 = time.perf_counter()
        kernel_call()
        spans.append((time.perf_counter() - t0) * 1e3)
    median = statistics.median(spans)
    return [median, min(spans), max(spans)] if quantiles else median


class Search:
    """A ``triton.autotune`` over ``space`` built for one set-up (so every variant process searches afresh and
    pays for it), pruned by ``prune(config, named_args) -> bool`` (True: keep), keyed by ``key``."""

    def __init__(self, kernel: Any, space: Sequence[triton.Config], default: triton.Config, key: list[str],
                 prune: Callable[[triton.Config, dict[str, Any]], bool],
                 reset_to_zero: list[str] | None = None) -> None:  # fmt: skip
        if not any(c is default for c in space):
            raise ValueError(f"the hand default {describe(default)} must be in the search space to be timed too")
        self.kernel, self.space, self.default, self.prune = kernel, list(space), default, prune
        self.tuner = triton.autotune(
            configs=self.space,
            key=key,
            prune_configs_by={"early_config_prune": self._prune},
            reset_to_zero=reset_to_zero,
            do_bench=None if context().is_cuda else cpu_bench,  # None: Triton's do_bench (CUDA events, L2 flushed)
        )(kernel)

    def _prune(self, configs: list[triton.Config], named_args: dict[str, Any], **_: Any) -> list[triton.Config]:
        return [c for c in configs if c is self.default or self.prune(c, named_args)]

    def run(self, launch: Callable[[Any], None], args: Sequence[Any], constexprs: dict[str, Any],
            grid: Callable[[dict[str, Any]], tuple[int, ...]]) -> None:  # fmt: skip
        """Search: compile every kept configuration (timed apart, on a GPU), then ``launch(tuner)`` once, which
        times them all and keeps the fastest; record what it cost and what it chose."""
        ctx = context()
        t0 = time.perf_counter()
        compile_s = 0.0
        if not interpreted(self.kernel):
            named = dict(zip(self.tuner.arg_names, args, strict=False))
            for config in self._prune(self.space, named):
                self.kernel.warmup(*args, grid=grid(config.all_kwargs()), **constexprs, **config.all_kwargs())
            compile_s = time.perf_counter() - t0
        launch(self.tuner)
        if ctx.is_cuda:
            torch.cuda.synchronize(ctx.device)
        search_s = time.perf_counter() - t0
        timings = {c: float(t[0] if isinstance(t, (list, tuple)) else t)
                   for c, t in getattr(self.tuner, "configs_timings", {}).items()}  # fmt: skip
        best = self.tuner.best_config
        ctx.record("search_s", round(search_s, 3))
        if compile_s:
            ctx.record("search_compile_s", round(compile_s, 3))
        ctx.record("configs_in_space", len(self.space))
        ctx.record("configs_timed", len(timings))
        ctx.record("config", describe(best))
        if self.default in timings and best in timings:
            slow, fast = timings[self.default], timings[best]
            ctx.record("default_in_search_ms", round(slow, 5))
            ctx.record("best_in_search_ms", round(fast, 5))
            ctx.record("search_gain", round(slow / fast, 3))
            if slow > fast:
                ctx.record("break_even_calls", math.ceil(search_s * 1e3 / (slow - fast)))
        self.best = best


# --- the matmul ---------------------------------------------------------------------------------------


@triton.jit
def grouped_tile(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(tile row, tile column) of linear tile ``tile``, GROUP_M tile rows at a time down each column, so
    programs running together share A's and B's tiles in L2."""
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M  # not tl.cdiv: a triton.language.standard helper (see add above)
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """C = A @ B, A [M, K] and B [K, N] bf16 row-major, fp32 accumulation on the tensor cores.

    Program (t, s) computes output tile t over the s-th of SPLIT_K equal runs of K steps; with SPLIT_K = 1 it
    stores the tile (C's dtype), otherwise it adds its partial sum into C (fp32, zeroed before the launch)
    with atomics. ``UPCAST``: the CPU interpreter (triton 3.9) multiplies bf16 tiles as their uint16 bit
    patterns, so there the tiles go in as fp32 (bf16 products are exact in fp32, as on the tensor cores).
    """
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    steps = (K + BLOCK_K - 1) // BLOCK_K
    per_split = (steps + SPLIT_K - 1) // SPLIT_K * BLOCK_K
    k_lo = tl.program_id(1) * per_split
    k_hi = tl.minimum(K, k_lo + per_split)
    a_rows = a_ptr + rm.to(tl.int64)[:, None] * K
    acc = tl.full([BLOCK_M, BLOCK_N], 0.0, tl.float32)
    for k in range(k_lo, k_hi, BLOCK_K):
        kk = k + rk
        a = tl.load(a_rows + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < k_hi), other=0.0)
        b = tl.load(b_ptr + kk.to(tl.int64)[:, None] * N + rn[None, :], mask=(kk[:, None] < k_hi) & (rn[None, :] < N),
                    other=0.0)  # fmt: skip
        if UPCAST:
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
        else:
            acc = tl.dot(a, b, acc)
    c = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    cmask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=cmask)
    else:
        tl.atomic_add(c, acc, mask=cmask)


def tile(bm: int, bn: int, bk: int, warps: int, stages: int, split: int = 1, group: int = 8) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group, "SPLIT_K": split},
                         num_warps=warps, num_stages=stages)  # fmt: skip


def matmul_grid(m: int, n: int) -> Callable[[dict[str, Any]], tuple[int, int]]:
    return lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), meta["SPLIT_K"])


def matmul_fits(config: triton.Config, args: dict[str, Any]) -> bool:
    """Keep a matmul configuration that fits sm_90 (pipeline buffers in shared memory, the accumulator in
    registers), whose tiles are no larger than the problem rounded up, and whose K splits get >= 2 steps."""
    kw, warps, stages = config.kwargs, config.num_warps, config.num_stages
    bm, bn, bk, split = kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["SPLIT_K"]
    smem = stages * (bm * bk + bk * bn) * 2
    regs = bm * bn / (32 * warps)
    m, n, k = (triton.next_power_of_2(args[d]) for d in ("M", "N", "K"))
    return smem <= SMEM_LIMIT and regs <= ACC_REGS and bm <= max(m, 16) and bn <= max(n, 16) and \
        k // (bk * split) >= 2  # fmt: skip


class Example:
    """One variant: ``make()`` builds (operands, output, work) in setup; each call is ``launch(operands, out)``;
    ``prepare(operands, out)`` runs once after ``make`` (the optimized sides' search). Output: ``out``; inputs:
    the operands."""

    def __init__(
        self,
        make: Callable[[], tuple],
        launch: Callable[..., None],
        prepare: Callable[..., None] | None = None,
        config: BenchmarkConfig | None = None,
    ) -> None:
        self.make, self.launch, self.prepare, self.config = make, launch, prepare, config

    def get_config(self) -> BenchmarkConfig | None:
        return self.config

    def setup(self) -> None:
        self.operands, self.out, self.work = self.make()
        if self.prepare is not None:
            self.prepare(self.operands, self.out)

    def benchmark_fn(self) -> None:
        self.launch(self.operands, self.out)

    def teardown(self) -> None:
        del self.operands, self.out, self.work

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> tuple:
        return tuple(t for t in self.operands if isinstance(t, torch.Tensor) and t.is_floating_point())

    def get_work(self) -> dict[str, int | str]:
        return self.work


def search_config() -> BenchmarkConfig:
    """The optimized sides' config: set-up holds the search (on an H100 ~1 s to compile and time each matmul
    candidate), so it gets 10 minutes instead of the default 30 s."""
    return BenchmarkConfig(setup_timeout_seconds=600.0)


# matmul_search: 8192³ bf16 ------------------------------------------------------------------------------

# A hand default: the square 64 x 64 tile of the Triton tutorial's smallest configuration, 4 warps, 3 stages.
MATMUL_DEFAULT = tile(64, 64, 32, 4, 3)
MATMUL_SPACE = [
    MATMUL_DEFAULT if (bm, bn, bk, stages) == (64, 64, 32, 3) else tile(bm, bn, bk, 4 if bm * bn <= 8192 else 8, stages)
    for bm, bn in ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
    for bk in (32, 64)
    for stages in (3, 4)
]  # fmt: skip


def matmul_operands(m: int, n: int, k: int) -> tuple:
    """A [m, k], B [k, n] (seeded, bf16) and C [m, n] bf16. Work (minimum): read A and B once, write C once;
    2MNK FLOPs."""
    a, b = randn(m, k, offset=0), randn(k, n, offset=1)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
    return (a, b), out, {"bytes": 2 * (m * k + k * n + m * n), "flops": 2 * m * n * k}


def square_matmul() -> tuple:
    """matmul_search: C = A @ B, bf16 8192³ (1.1 TFLOP; A, B 128 MiB each, C 128 MiB); 37 x 72 x 40 smoke."""
    return matmul_operands(*context().size((8192, 8192, 8192), (37, 72, 40)))


# split_k_search: a weight gradient's shape, 1024 x 1024 x 65536 -> fp32 ------------------------------------

# A hand default that is right for square problems: 128 x 128 tiles on 8 warps, no split.
SPLITK_DEFAULT = tile(128, 128, 64, 8, 3)
SPLITK_SPACE = [
    SPLITK_DEFAULT if (bm, bn, split) == (128, 128, 1) else tile(bm, bn, 64, warps, 3, split)
    for bm, bn, warps in ((128, 128, 8), (128, 64, 4), (64, 128, 4), (64, 64, 4))
    for split in (1, 2, 4, 8, 16)
]  # fmt: skip
SPLITK_RTOL = 1e-4  # fp32 sums of 65536 products in another order: ~2e-6 apart (README)


def tall_k_matmul() -> tuple:
    """split_k_search: C = A @ B with M = N = 1024 and K = 65536 (A 128 MiB, B 128 MiB bf16; C fp32 4 MiB),
    the shape of a weight gradient over 64 Ki tokens: 137 GFLOP but only 64 output tiles of 128 x 128 for 132
    SMs. Smoke: 40 x 48 x 700. Work (minimum): read A and B once, write C once; 2MNK FLOPs on bf16 tensor
    cores (``dtype``: the fp32 output does not say so)."""
    m, n, k = context().size((1024, 1024, 65536), (40, 48, 700))
    a, b = randn(m, k, offset=0, scale=k**-0.25), randn(k, n, offset=1, scale=k**-0.25)
    out = torch.empty(m, n, device=a.device)
    return (a, b), out, {"bytes": 2 * (m * k + k * n) + 4 * m * n, "flops": 2 * m * n * k, "dtype": "bf16"}


def matmul_args(operands: tuple, out: torch.Tensor) -> tuple[list[Any], dict[str, Any], Callable]:
    (a, b), (m, k), n = operands, operands[0].shape, operands[1].shape[1]
    return [a, b, out, m, n, k], {"UPCAST": interpreted(matmul_kernel)}, matmul_grid(m, n)


def fixed_matmul(config: triton.Config) -> Callable[[tuple, torch.Tensor], None]:
    """A launch with one configuration (C zeroed first when its K is split: the partial sums add into it)."""

    def launch(operands: tuple, out: torch.Tensor) -> None:
        args, constexprs, grid = matmul_args(operands, out)
        if config.kwargs["SPLIT_K"] > 1:
            out.zero_()
        matmul_kernel[grid(config.all_kwargs())](*args, **constexprs, **config.all_kwargs())

    return launch


class TunedMatmul:
    """The optimized sides' launch: a ``Search`` over ``space`` in ``prepare`` (set-up), then every call
    launches the chosen configuration through the autotuner (which only looks it up), C zeroed first when
    the chosen configuration splits K (as ``fixed_matmul`` does)."""

    def __init__(self, space: Sequence[triton.Config], default: triton.Config, zero: bool) -> None:
        self.space, self.default, self.zero = space, default, zero  # zero: the space splits K (C is fp32)

    def prepare(self, operands: tuple, out: torch.Tensor) -> None:
        self.search = Search(matmul_kernel, self.space, self.default, key=["M", "N", "K"], prune=matmul_fits,
                             reset_to_zero=["c_ptr"] if self.zero else None)  # fmt: skip
        args, constexprs, grid = matmul_args(operands, out)
        self.search.run(lambda tuner: tuner[grid](*args, **constexprs), args, constexprs, grid)

    def launch(self, operands: tuple, out: torch.Tensor) -> None:
        args, constexprs, grid = matmul_args(operands, out)
        if self.search.best.kwargs["SPLIT_K"] > 1:
            out.zero_()
        self.search.tuner[grid](*args, **constexprs)


# --- RMSNorm over rows --------------------------------------------------------------------------------

EPS = 1e-6


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, M, N, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr,
                   ONE_PASS: tl.constexpr):  # fmt: skip
    """out[r] = x[r] / sqrt(mean(x[r]²) + eps) * w for ROWS rows per program, bf16 in and out, fp32 inside.

    ``ONE_PASS`` (BLOCK >= N): the rows are held in registers between the sum of squares and the scaling,
    one read of x. Otherwise BLOCK columns at a time, twice: the sums, then the scaling (the second read
    mostly from L2: a program's rows were read moments before).
    """
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < M
    base = rows.to(tl.int64)[:, None] * N
    if ONE_PASS:
        cols = tl.arange(0, BLOCK)
        mask = rmask[:, None] & (cols < N)[None, :]
        x = tl.load(x_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        r = 1.0 / tl.sqrt(tl.reduce(x * x, 1, add) / N + eps)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + cols[None, :], (x * r[:, None] * w[None, :]).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.full([ROWS, BLOCK], 0.0, tl.float32)
        for c0 in range(0, N, BLOCK):
            cols = c0 + tl.arange(0, BLOCK)
            mask = rmask[:, None] & (cols < N)[None, :]
            x = tl.load(x_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        r = 1.0 / tl.sqrt(tl.reduce(acc, 1, add) / N + eps)
        for c0 in range(0, N, BLOCK):
            cols = c0 + tl.arange(0, BLOCK)
            mask = rmask[:, None] & (cols < N)[None, :]
            x = tl.load(x_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
            y = x * r[:, None] * w[None, :]
            tl.store(out_ptr + base + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def norm_config(rows: int, block: int, one_pass: bool, warps: int) -> triton.Config:
    return triton.Config({"ROWS": rows, "BLOCK": block, "ONE_PASS": one_pass}, num_warps=warps)


def norm_default(n: int) -> triton.Config:
    """The hand default: one row per program, the whole row in one block (next power of two), Triton's
    default 4 warps: what a kernel gets when nobody picks."""
    return norm_config(1, triton.next_power_of_2(n), True, 4)


def norm_space(n: int, default: triton.Config) -> list[triton.Config]:
    """Rows per program x columns per step (the whole row in one pass, or 4096 / 1024 at a time in two) x
    warps; a tile must give each thread 1-128 values to hold (1-32 accumulators in two passes)."""
    whole = triton.next_power_of_2(n)
    space = [default]
    for rows in (1, 2, 4, 8, 16, 32):
        for block, one_pass in ((whole, True), (4096, False), (1024, False)):
            if not one_pass and block >= n or rows * block > 16384:
                continue
            for warps in (1, 2, 4, 8, 16):
                per_thread = rows * block / (32 * warps)
                is_default = (rows, block, one_pass, warps) == (1, whole, True, 4)
                if 1 <= per_thread <= (128 if one_pass else 32) and not is_default:
                    space.append(norm_config(rows, block, one_pass, warps))
    return space


def rows_problem(shape: tuple[int, int, int]) -> Callable[[], tuple]:
    """x [M, N] bf16 filling 4x L2 (200 MB on an H100), N = shape[0] (smoke: shape[1] x shape[2]), and the
    weight w [N]. Work (minimum): read x and w, write out (2 B each); ~4 FLOPs per element."""

    def make() -> tuple:
        ctx = context()
        full_n, smoke_m, smoke_n = shape
        n = ctx.size(full_n, smoke_n)
        m = ctx.working_set(l2=4, smoke=2 * n * smoke_m, name="x_bytes") // (2 * n)
        ctx.record("shape", f"{m} x {n}")
        x, w = randn(m, n, offset=0, scale=2.0), randn(n, offset=1, scale=0.5).add_(1.0)
        return (x, w), torch.empty_like(x), {"bytes": 2 * (2 * m * n + n), "flops": 4 * m * n}

    return make


def norm_grid(m: int) -> Callable[[dict[str, Any]], tuple[int]]:
    return lambda meta: (triton.cdiv(m, meta["ROWS"]),)


def fixed_norm(operands: tuple, out: torch.Tensor) -> None:
    """The baseline launch: the hand default for the row length."""
    (x, w), (m, n) = operands, operands[0].shape
    config = norm_default(n)
    rmsnorm_kernel[norm_grid(m)(config.all_kwargs())](x, w, out, m, n, EPS, **config.all_kwargs())


class TunedNorm:
    """The optimized sides' launch: a ``Search`` over ``norm_space`` for the row length, once in set-up."""

    def prepare(self, operands: tuple, out: torch.Tensor) -> None:
        (x, w), (m, n) = operands, operands[0].shape
        default = norm_default(n)
        self.search = Search(rmsnorm_kernel, norm_space(n, default), default, key=["M", "N"],
                             prune=lambda c, args: True)  # fmt: skip
        args = [x, w, out, m, n, EPS]
        self.search.run(lambda tuner: tuner[norm_grid(m)](*args), args, {}, norm_grid(m))

    def launch(self, operands: tuple, out: torch.Tensor) -> None:
        (x, w), (m, n) = operands, operands[0].shape
        self.search.tuner[norm_grid(m)](x, w, out, m, n, EPS)


# Full row length; smoke rows x row length (a few interpreted programs per candidate of the search)
WIDE_ROWS = (16384, 6, 1100)  # Llama-3-405B's hidden size
HEAD_ROWS = (128, 37, 40)  # one attention head (QK-norm normalises q and k per head)
