"""What every chapter-7 variant shares: seeded inputs, the benchmark shell, the problem sizes.

A variant file holds only its kernel and how to launch it; ``Example`` supplies setup, teardown,
the output the harness compares and the work counts. Full sizes move well over 2x L2 per call
(L2 is 50 MB on an H100, 60 MB on an H200) so every call streams from DRAM; smoke sizes keep the
Triton interpreter (CPU) to a few dozen programs per call, with lengths that are not multiples
of any block so every mask is exercised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from bench import context

BLOCK = 1024  # elements per program in the 1-D kernels
A, B = 1.5, -0.25  # coefficients of out = x * A + B

C_SELF, C_NEIGHBOUR = 0.5, 0.125  # stencil_blocking: out = C_SELF * centre + C_NEIGHBOUR * (N + S + W + E)

# input (one tensor, or a tuple of them for gather and matmul), preallocated output, work counts
Inputs = tuple[Any, torch.Tensor, dict[str, int]]
Launch = Callable[[Any, torch.Tensor], None]  # one call's work: read the input, write out


def generator() -> torch.Generator:
    """A generator on the run's device seeded with the run's seed: baseline and optimized draw alike."""
    ctx = context()
    return torch.Generator(device=ctx.device).manual_seed(ctx.seed)


def randn(*shape: int) -> torch.Tensor:
    """Fresh N(0, 1) fp32 values on the run's device from a generator seeded with the run's seed."""
    return torch.randn(*shape, generator=generator(), device=context().device)


def elementwise(kernel: Any, *args: float, block: int = BLOCK, num_warps: int = 4) -> Launch:
    """Launch ``kernel(inp, out, *args, n, BLOCK=block)``, one program per ``block`` of out's n elements."""

    def launch(inp: torch.Tensor, out: torch.Tensor) -> None:
        n = out.numel()
        kernel[(triton.cdiv(n, block),)](inp, out, *args, n, BLOCK=block, num_warps=num_warps)

    return launch


@triton.jit
def copy_blocks(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """vectorized_copy: out = x, one contiguous BLOCK per program (BLOCK / (32 * num_warps) per thread)."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    tl.store(out_ptr + idx, tl.load(x_ptr + idx, mask=mask), mask=mask)


def vector(flops_per_element: int = 0) -> Inputs:
    """coalescing, vectorized_copy: x of 64 Mi fp32 (256 MiB), read once; out written once."""
    x = randn(context().size(64 * 2**20, 3 * BLOCK + 7))  # smoke: 4 programs, 25 of 128 for the copy
    n = x.numel()
    work = {"bytes": 2 * 4 * n}
    if flops_per_element:
        work["flops"] = flops_per_element * n
    return x, torch.empty_like(x), work


def matrix() -> Inputs:
    """transpose: an 8192 x 8192 fp32 matrix (256 MiB) and its transpose's buffer."""
    m, n = context().size((8192, 8192), (29, 200))
    x = randn(m, n)
    return x, torch.empty(n, m, device=x.device), {"bytes": 2 * 4 * m * n}


def particles(layout: str) -> Inputs:
    """aos_soa: 32 Mi particles of 4 fp32 fields (x, y, z, w), 512 MiB, in ``layout`` "aos" or "soa".

    Both layouts hold the same values, drawn once as [4, N]; the AoS copy is made here, untimed.
    The minimum work is the same for both: read x and y (8 B), write out (4 B) per particle.
    """
    fields = randn(4, context().size(32 * 2**20, 3 * BLOCK + 7))
    if layout == "aos":
        fields = fields.T.contiguous()  # [N, 4]: particle i's fields at bytes 16i .. 16i+15
    elif layout != "soa":
        raise ValueError(f"layout={layout!r} is not one of 'aos', 'soa'")
    n = fields.numel() // 4
    return fields, torch.empty(n, device=fields.device), {"bytes": 3 * 4 * n, "flops": 3 * n}


@triton.jit
def gather_scatter(x_ptr, src_ptr, dst_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """gather_locality: out[dst[i]] = x[src[i]] for the i of one contiguous BLOCK of the pair list."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    src = tl.load(src_ptr + i, mask=mask)
    dst = tl.load(dst_ptr + i, mask=mask)
    tl.store(out_ptr + dst, tl.load(x_ptr + src, mask=mask), mask=mask)


def gather_launch(pairs: tuple[torch.Tensor, torch.Tensor, torch.Tensor], out: torch.Tensor) -> None:
    x, src, dst = pairs
    n = src.numel()
    gather_scatter[(triton.cdiv(n, BLOCK),)](x, src, dst, out, n, BLOCK=BLOCK)


def gather_pairs(order: str) -> Inputs:
    """gather_locality: out[j] = x[s[j]], s = N sorted draws from [0, N), as a list of (src, dst) pairs.

    x is 64 Mi fp32 (256 MiB, 5x the H100's L2). Both orders hold the same N pairs (s[j], j), so
    both write the same tensor; "random" lists them in a seeded random order, "sorted" by address.
    The draws repeat (about 63% of x is read), so the minimum bytes count each distinct x element
    once: 8 B of indices per pair (int32 src, dst), 4 B per distinct x element, 4 B written.
    """
    ctx = context()
    n = ctx.size(64 * 2**20, 3 * BLOCK + 7)  # smoke: 4 programs
    gen = generator()
    x = torch.randn(n, generator=gen, device=ctx.device)
    s = torch.randint(n, (n,), generator=gen, device=ctx.device).sort().values
    dst = torch.arange(n, device=ctx.device)
    if order == "random":
        dst = torch.randperm(n, generator=gen, device=ctx.device)
    elif order != "sorted":
        raise ValueError(f"order={order!r} is not one of 'random', 'sorted'")
    src = s[dst]
    distinct = int((s[1:] != s[:-1]).sum()) + 1
    pairs = (x, src.to(torch.int32), dst.to(torch.int32))
    return pairs, torch.empty_like(x), {"bytes": 8 * n + 4 * distinct + 4 * n}


def matmul_operands() -> Inputs:
    """tiled_matmul: A (M x K) @ B (K x N), fp32; 4096^3 on a GPU (64 MiB per operand), 19 x 45 x 37 smoke.

    Minimum bytes: each operand read once and C written once, 4(MK + KN + MN); 2MNK flops.
    """
    m, n, k = context().size((4096, 4096, 4096), (19, 45, 37))
    ab = randn(m * k + k * n)  # one draw: two draws from the same seed would repeat their values
    a, b = ab[: m * k].view(m, k), ab[m * k :].view(k, n).clone()
    return (a, b), torch.empty(m, n, device=a.device), {"bytes": 4 * (m * k + k * n + m * n), "flops": 2 * m * n * k}


# tl.zeros, tl.sum and the rest of triton.language.standard are @triton.jit helpers; the harness's
# pre-warmed server imports triton before a CPU child sets TRITON_INTERPRET=1, so in that child they
# are compiled-mode functions the interpreter refuses to call. Kernels here use builtins instead:
# tl.full for tl.zeros, tl.reduce with tl.sum's own combine function (what tl.sum does inside; the
# interpreter reduces with numpy for it, where another function would run element by element).
add = tl.standard._sum_combine


@triton.jit
def row_sums(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    """pipelined_loads: out[r] = sum of row r, one program per row walking it BLOCK columns at a time.

    ``tl.range(..., num_stages=NUM_STAGES)`` marks this loop for Triton's software pipeliner; a
    loop without ``tl.dot`` is pipelined only when so marked (the launch's ``num_stages`` applies
    to dot loops), and 1 stage means no pipelining.
    """
    row = x_ptr + tl.program_id(0).to(tl.int64) * n_cols
    acc = tl.full([BLOCK], 0.0, tl.float32)
    for start in tl.range(0, n_cols, BLOCK, num_stages=NUM_STAGES):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(row + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.reduce(acc, 0, add))


def row_sums_launch(num_stages: int) -> Launch:
    def launch(x: torch.Tensor, out: torch.Tensor) -> None:
        row_sums[(x.shape[0],)](x, out, x.shape[1], BLOCK=BLOCK, NUM_STAGES=num_stages, num_warps=4)

    return launch


def long_rows() -> Inputs:
    """pipelined_loads: 256 rows of 256 Ki fp32 (256 MiB); few programs (about 2 per SM), long loops.

    Minimum bytes: x read once (4MN) and M sums written; MN - M adds, counted as MN flops.
    """
    m, n = context().size((256, 256 * 1024), (5, 3 * BLOCK + 7))  # smoke: 5 programs, 4 steps each
    x = randn(m, n)
    return x, torch.empty(m, device=x.device), {"bytes": 4 * m * n + 4 * m, "flops": m * n}


@triton.jit
def stencil5(x_ptr, out_ptr, M, N, c_self, c_nb, TILE_M: tl.constexpr, TILE_N: tl.constexpr, COLS_FAST: tl.constexpr):
    """stencil_blocking: out = c_self * x + c_nb * (N + S + W + E), zero outside, one tile per program.

    ``COLS_FAST``: consecutive programs walk along a row (row-major order over the grid); otherwise
    they walk down the tile rows first.
    """
    if COLS_FAST:
        pid_m, pid_n = tl.program_id(1), tl.program_id(0)
    else:
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    i = (pid_m * TILE_M + tl.arange(0, TILE_M))[:, None]
    j = (pid_n * TILE_N + tl.arange(0, TILE_N))[None, :]
    inside = (i < M) & (j < N)
    at = x_ptr + i * N + j
    centre = tl.load(at, mask=inside)
    west = tl.load(at - 1, mask=inside & (j > 0), other=0.0)
    east = tl.load(at + 1, mask=(i < M) & (j + 1 < N), other=0.0)
    north = tl.load(at - N, mask=inside & (i > 0), other=0.0)
    south = tl.load(at + N, mask=(i + 1 < M) & (j < N), other=0.0)
    tl.store(out_ptr + i * N + j, c_self * centre + c_nb * ((north + south) + (west + east)), mask=inside)


MAX_GRID_Y = 65535  # CUDA's limit on a grid's 2nd (and 3rd) dimension; the 1st allows 2**31 - 1


def stencil_programs(m: int, n: int, tile_m: int, tile_n: int, cols_fast: bool) -> tuple[int, int]:
    """The launch grid: (column blocks, row blocks) when ``cols_fast``, else (row blocks, column blocks)."""
    rows, cols = triton.cdiv(m, tile_m), triton.cdiv(n, tile_n)
    grid = (cols, rows) if cols_fast else (rows, cols)
    if grid[1] > MAX_GRID_Y:
        raise ValueError(
            f"stencil grid {grid} for a {m} x {n} input with {tile_m} x {tile_n} tiles: the second dimension "
            f"exceeds CUDA's {MAX_GRID_Y}; walk the longer dimension first (cols_fast={not cols_fast})"
        )
    return grid


def stencil_launch(tile_m: int, tile_n: int, num_warps: int, cols_fast: bool = False) -> Launch:
    """Launch ``stencil5`` with tile_m x tile_n tiles; ``cols_fast``: row-major program order."""

    def launch(x: torch.Tensor, out: torch.Tensor) -> None:
        m, n = x.shape
        grid = stencil_programs(m, n, tile_m, tile_n, cols_fast)
        stencil5[grid](
            x, out, m, n, C_SELF, C_NEIGHBOUR, TILE_M=tile_m, TILE_N=tile_n, COLS_FAST=cols_fast, num_warps=num_warps
        )

    return launch


def stencil_grid() -> Inputs:
    """stencil_blocking: a 16 x 16 Mi fp32 grid (1 GiB; each row 64 MiB, more than L2) and the next one's buffer.

    Rows longer than L2 are what makes the traversal order matter: a row's neighbours are one row
    (64 MiB) apart in a row-major walk. Minimum bytes: the grid read once, the result written once
    (8MN); 6 flops per point (4 adds, 2 multiplies).
    """
    m, n = context().size((16, 16 * 2**20), (5, 700))
    x = randn(m, n)
    return x, torch.empty_like(x), {"bytes": 8 * m * n, "flops": 6 * m * n}


class Example:
    """One variant: ``make()`` builds inputs in setup; each call runs ``launch(inp, out)`` into ``out``."""

    def __init__(self, make: Callable[[], Inputs], launch: Launch) -> None:
        self.make = make
        self.launch = launch

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
