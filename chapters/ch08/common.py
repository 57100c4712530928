"""What every chapter-8 variant shares (and chapters 9 and 10 reuse): seeded inputs, the benchmark
shell, the combine functions, the FMA chain and the bf16 matmul kernel.

A variant file holds only its kernel or its launch configuration; ``Example`` (chapter 1's shell and
the inputs the harness may change) supplies setup, teardown, the output the harness compares and the
work counts, and chapter 1's ``randn`` draws the seeded inputs. Compute-bound pairs use fixed
problem sizes (their FLOPs are the point); memory-bound ones size their data relative to the
device's L2 (``ctx.working_set``) so every call streams from DRAM on an H100 and an H200 alike.
Smoke sizes keep the Triton interpreter (CPU) to a few programs per call, with lengths that are
not multiples of any block so every mask is exercised.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from bench import BenchmarkConfig, context
from chapters.ch01.common import Example as Shell
from chapters.ch01.common import Inputs, Launch, randn


class Example(Shell):
    """Chapter 1's benchmark shell, and which operands are the call's inputs: the harness changes those (and
    only those) in place to check that the output follows (``get_inputs``). By default every tensor
    operand; ``inputs`` picks fewer where an operand is a constant of the computation (coefficients, a
    stored table derived from constants) rather than data."""

    def __init__(
        self,
        make: Callable[[], Inputs],
        launch: Launch,
        config: BenchmarkConfig | None = None,
        inputs: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None,
    ) -> None:
        super().__init__(make, launch, config)
        self.inputs = inputs

    def get_inputs(self) -> tuple[Any, ...]:
        args = self.inputs(self.args) if self.inputs else self.args
        return tuple(a for a in args if isinstance(a, torch.Tensor))


def first_operand(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``Example(inputs=...)`` for problems whose first operand is the data and the rest constants."""
    return args[:1]


def programs_per_sm() -> int:
    """One per SM on a GPU (the persistent kernels' grid); 3 on a CPU, where the interpreter runs them in turn."""
    ctx = context()
    return ctx.facts.cores if ctx.is_cuda and ctx.facts else 3


def interpreted(kernel: Any) -> bool:
    """True when ``kernel`` runs in Triton's CPU interpreter (TRITON_INTERPRET=1 at import) instead of compiled."""
    return not isinstance(kernel, triton.runtime.jit.JITFunction)


# tl.sum, tl.max, tl.zeros and the rest of triton.language.standard are @triton.jit helpers, defined
# in whichever mode Triton was first imported in; a test process that imported it compiled cannot call
# them from interpreted kernels. Kernels here use builtins: tl.reduce with tl.sum's and tl.max's own combine
# functions (compiled, what those two do; the interpreter recognises them and reduces with numpy, where any
# other combine function runs element by element in Python: 1.07 s against 0.01 s per smoke-size call of
# atomic_reduction's tree here).
add = tl.standard._sum_combine
maximum = tl.standard._elementwise_max


# --- ilp, divergence: chains of dependent FMAs ------------------------------------------------

UNROLL = 8  # FMAs per trip of affine_chain's loop


@triton.jit
def affine_chain(x, a, b, trips):
    """x <- x * a + b, UNROLL * trips times: each FMA needs the previous one's result (a dependency chain).

    Unrolled by UNROLL = 8 (a literal: a jit function reads only constexpr globals), so the loop's own
    counter and branch are a small share of the instructions.
    """
    for _ in range(trips):
        for _u in tl.static_range(8):
            x = tl.fma(x, a, b)
    return x


def chain_trips(length: int) -> int:
    """affine_chain's trip count for a chain of ``length`` FMAs; the length must be a multiple of UNROLL."""
    if length <= 0 or length % UNROLL:
        raise ValueError(f"chain length {length} must be a positive multiple of {UNROLL}")
    return length // UNROLL


# --- the bf16 matmul: register_pressure here, epilogue fusion and tile sizes in ch09, pipelining in ch10 ---


@triton.jit
def grouped_tile(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(tile row, tile column) of linear tile ``tile``, walking GROUP_M tile rows at a time down each
    column: consecutive programs share B's column tiles and A's row tiles while they are in L2."""
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def dot(a, b, acc, UPCAST: tl.constexpr):
    """acc + a @ b. ``UPCAST``: the CPU interpreter (triton 3.9) multiplies bf16 tiles as their uint16 bit
    patterns, so there the operands go in as fp32: bf16 products are exact in fp32 and the tensor cores
    accumulate in fp32 too, so the result is the GPU's up to summation order."""
    if UPCAST:
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def bias_gelu(acc, bias_ptr, cols, N):
    """acc + bias[cols], then the exact (erf) GELU, all in fp32: ch09's fused epilogue."""
    acc += tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    return 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))


@triton.jit
def tile_product(
    a_ptr,
    b_ptr,
    rows,
    cols,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """The fp32 product of A's ``rows`` and B's ``cols`` (one tile of C), K in steps of BLOCK_K."""
    ks = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge are wrapped onto valid ones, so only K needs a load mask; their
    # results are never stored.
    a_ptrs = a_ptr + (rows % M)[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * N + (cols % N)[None, :]
    acc = tl.full([BLOCK_M, BLOCK_N], 0.0, tl.float32)  # not tl.zeros: see add
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k, other=0.0)
        acc = dot(a, b, acc, UPCAST)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    return acc


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    bias_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    BIAS_GELU: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """C = A @ B (row-major, bf16 in, fp32 accumulate), one BLOCK_M x BLOCK_N tile of C per program;
    with ``BIAS_GELU`` C = gelu(A @ B + bias) in the epilogue. Pipelined by the launch's ``num_stages``."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tile_product(a_ptr, b_ptr, rows, cols, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, UPCAST)
    if BIAS_GELU:
        acc = bias_gelu(acc, bias_ptr, cols, N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def matmul(
    block: tuple[int, int, int] = (128, 256, 64), num_warps: int = 8, num_stages: int = 3, group_m: int = 8
) -> Launch:
    """Launch ``matmul_kernel``: out = a @ b, or gelu(a @ b + bias) when called with a bias."""

    def launch(a: torch.Tensor, b: torch.Tensor, *rest: torch.Tensor) -> None:
        *bias, out = rest
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = block
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        matmul_kernel[grid](
            a, b, out, bias[0] if bias else out, m, n, k,
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, BIAS_GELU=bool(bias),
            UPCAST=interpreted(matmul_kernel), num_warps=num_warps, num_stages=num_stages,
        )  # fmt: skip

    return launch


def matmul_work(m: int, n: int, k: int, bias: bool = False) -> dict[str, int]:
    """Minimum work of a bf16 C = A @ B (+ bias): read A, B (and the bias) once, write C once; 2MNK flops."""
    return {"bytes": 2 * (m * k + k * n + m * n + (n if bias else 0)), "flops": 2 * m * n * k}


def matmul_operands(m: int, n: int, k: int, bias: bool = False) -> Inputs:
    """bf16 A (m x k) ~ N(0, 1) and B (k x n) ~ N(0, 1/k), so C is O(1); a bias ~ N(0, 0.25) when asked."""
    a = randn(m, k, offset=0).bfloat16()
    b = randn(k, n, offset=1, scale=1 / math.sqrt(k)).bfloat16()
    operands: tuple[torch.Tensor, ...] = (a, b, randn(n, offset=2, scale=0.5).bfloat16()) if bias else (a, b)
    out = torch.empty(m, n, device=a.device, dtype=torch.bfloat16)
    return operands, out, matmul_work(m, n, k, bias)


def square_matmul() -> Inputs:
    """8192³ bf16 (1.1 TFLOP, 384 MiB moved at least); 37 x 45 x 40 smoke: partial tiles, a partial K step."""
    m, n, k = context().size((8192, 8192, 8192), (37, 45, 40))
    return matmul_operands(m, n, k)


# --- ilp: one program per SM, a chain of FMAs per element ---------------------------------------

CHAIN = 1024  # ilp: FMAs per element
A_CHAIN, B_CHAIN = 0.9990234375, 0.01  # ilp: x <- x * A + B keeps x O(1) and still dependent on its start


@triton.jit
def chains(x_ptr, out_ptr, n, a, b, trips, BLOCK: tl.constexpr):
    """out = affine_chain(x): program p takes blocks p, p + P, p + 2P, ... of BLOCK elements (P programs)."""
    step = tl.num_programs(0) * BLOCK
    for start in range(tl.program_id(0) * BLOCK, n, step):
        idx = start + tl.arange(0, BLOCK)
        mask = idx < n
        x = tl.load(x_ptr + idx, mask=mask, other=0.0)
        tl.store(out_ptr + idx, affine_chain(x, a, b, trips), mask=mask)


def chains_launch(elements_per_thread: int, num_warps: int = 4) -> Launch:
    """One program of ``num_warps`` warps per SM; each thread carries ``elements_per_thread`` chains at once."""

    def launch(x: torch.Tensor, trips: int, out: torch.Tensor) -> None:
        block = 32 * num_warps * elements_per_thread
        chains[(programs_per_sm(),)](x, out, x.numel(), A_CHAIN, B_CHAIN, trips, BLOCK=block, num_warps=num_warps)

    return launch


def chain_inputs() -> Inputs:
    """ilp: 4 Mi fp32 (16 MiB in, 16 MiB out) through CHAIN FMAs each; 3 * 1024 + 7 elements, 16 FMAs at smoke size.

    Work: read x and write out once (8 B per element); 2 flops per FMA.
    """
    ctx = context()
    n, length = ctx.size((4 * 2**20, CHAIN), (3 * 1024 + 7, 2 * UNROLL))
    x = randn(n)
    return (x, chain_trips(length)), torch.empty_like(x), {"bytes": 8 * n, "flops": 2 * length * n}


# --- divergence: a piecewise function whose pieces share one shape ---------------------------------

PIECE_CHAIN = 256  # divergence: FMAs per piece
# Piece k (x < -1, -1 <= x < 0, 0 <= x < 1, x >= 1: 16 / 34 / 34 / 16 % of N(0, 1) draws) runs
# x <- x * A_PIECE[k] + B_PIECE[k]; |a| close to 1 keeps the result dependent on x after 256 steps.
A_PIECE = (0.998046875, -0.9990234375, 0.99951171875, 0.99609375)
B_PIECE = (0.01, -0.02, 0.005, 0.015)


@triton.jit
def piece_index(x):
    """Which of the four pieces x falls in: the count of thresholds -1, 0, 1 at or below x."""
    return (x >= -1.0).to(tl.int32) + (x >= 0.0).to(tl.int32) + (x >= 1.0).to(tl.int32)


def piecewise_launch(kernel: Any) -> Launch:
    """Launch a divergence kernel ``kernel(x, a, b, out, n, trips, BLOCK)``, one program per 1024 elements."""

    def launch(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, trips: int, out: torch.Tensor) -> None:
        n = x.numel()
        kernel[(triton.cdiv(n, 1024),)](x, a, b, out, n, trips, BLOCK=1024, num_warps=4)

    return launch


def piecewise_inputs() -> Inputs:
    """divergence: 16 Mi fp32 (64 MiB in, 64 MiB out), PIECE_CHAIN FMAs per element; 3 * 1024 + 7 and 16 at smoke size.

    Work (minimum): read x, write out (8 B per element); one piece's chain per element, 2 flops per FMA.
    """
    ctx = context()
    n, length = ctx.size((16 * 2**20, PIECE_CHAIN), (3 * 1024 + 7, 2 * UNROLL))
    x = randn(n)
    a = torch.tensor(A_PIECE, device=x.device)
    b = torch.tensor(B_PIECE, device=x.device)
    return (x, a, b, chain_trips(length)), torch.empty_like(x), {"bytes": 8 * n, "flops": 2 * length * n}


# --- atomic_reduction: row sums of a wide matrix ------------------------------------------------

ROW_BLOCK = 4096  # atomic_reduction: elements per program (16 KiB of fp32)


def reduction_grid(x: torch.Tensor) -> tuple[int, int]:
    """(rows, blocks per row): one program per ROW_BLOCK elements of a row."""
    return x.shape[0], triton.cdiv(x.shape[1], ROW_BLOCK)


def wide_rows() -> Inputs:
    """atomic_reduction: 64 rows filling 4x L2 (200 MB on an H100: 64 x 781 Ki fp32); 3 x (2 * 4096 + 7) smoke.

    Output: the 64 row sums (fp32). Work (minimum): read x once, write the sums; one add per element.
    """
    ctx = context()
    rows = ctx.size(64, 3)
    cols = ctx.working_set(l2=4, smoke=4 * rows * (2 * ROW_BLOCK + 7), name="x_bytes") // (4 * rows)
    x = randn(rows, cols)
    return (x,), torch.empty(rows, device=x.device), {"bytes": 4 * rows * cols + 4 * rows, "flops": rows * cols}


# --- rows_per_program: row sums of a tall, narrow matrix ----------------------------------------

NARROW = 64  # rows_per_program: columns per row (256 B of fp32)
ROWS_PER_PROGRAM = 64  # rows_per_program, optimized: 64 rows of 64 fp32 = 16 KiB per program


@triton.jit
def row_sums(x_ptr, out_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[r] = the sum of row r of x: program p loads rows p * BLOCK_M ... + BLOCK_M - 1 as one
    [BLOCK_M, BLOCK_N] tile and reduces it along the row; each row's additions are the same whatever BLOCK_M."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.reduce(x, 1, add), mask=rows < n_rows)


def row_sums_launch(rows_per_program: int) -> Launch:
    """Launch ``row_sums`` with ``rows_per_program`` rows per program and one warp per 1024 elements of its
    tile (32 fp32 per thread), at least one: a single 64-wide row gets one warp."""

    def launch(x: torch.Tensor, out: torch.Tensor) -> None:
        n_rows, n_cols = x.shape
        block_n = triton.next_power_of_2(n_cols)
        warps = max(1, min(8, rows_per_program * block_n // 1024))
        grid = (triton.cdiv(n_rows, rows_per_program),)
        row_sums[grid](x, out, n_rows, n_cols, BLOCK_M=rows_per_program, BLOCK_N=block_n, num_warps=warps)

    return launch


def narrow_rows() -> Inputs:
    """rows_per_program: rows of NARROW = 64 fp32 filling 4x L2 (200 MiB on an H100: 800 Ki rows of 256 B);
    2 * ROWS_PER_PROGRAM + 5 = 133 rows of 61 at smoke size (a partial last tile, masked columns).

    Output: the row sums (fp32). Work (minimum): read x once, write the sums; one add per element.
    """
    ctx = context()
    cols = ctx.size(NARROW, NARROW - 3)
    rows = ctx.working_set(l2=4, smoke=4 * cols * (2 * ROWS_PER_PROGRAM + 5), name="x_bytes") // (4 * cols)
    x = randn(rows, cols)
    return (x,), torch.empty(rows, device=x.device), {"bytes": 4 * rows * cols + 4 * rows, "flops": rows * cols}
