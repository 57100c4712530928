"""What every chapter-10 variant shares: the matmul problems, the TMA and persistent forms of chapter 8's
bf16 matmul kernel, and the host-to-device streaming problem.

The benchmark shell, the seeded draws, the grouped tile order, the ``dot`` helper and the pointer-based
matmul kernel come from chapter 8 (``chapters.ch08.common``): every matmul here computes the same tiles
in the same K order, so a pair differs only in how its operands reach the tensor cores. Smoke sizes
keep the Triton interpreter (CPU) to a few programs per call, with partial tiles and a partial K step;
their N and K are multiples of 8 because a tensor descriptor (TMA) needs 16-byte-aligned row strides.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from bench import context, time_alone
from chapters.ch01.common import Inputs, Launch, generator, stated_ceiling
from chapters.ch08.common import Example as Example  # re-exported: the variants import from this chapter
from chapters.ch08.common import dot, grouped_tile, interpreted, matmul_operands, programs_per_sm, tile_product
from chapters.ch08.common import matmul as matmul

TILE = (128, 256, 64)  # BLOCK_M, BLOCK_N, BLOCK_K of every matmul here (8 warps: chapter 8, register_pressure)


def square_matmul() -> Inputs:
    """software_pipelining, tma_loads: 8192³ bf16 (1.1 TFLOP, 384 MiB moved at least); 37 x 72 x 40 smoke."""
    m, n, k = context().size((8192, 8192, 8192), (37, 72, 40))
    return matmul_operands(m, n, k)


def short_k_matmul() -> Inputs:
    """persistent_tiles: 16384 x 16384 x 512 bf16 (275 GFLOP; A, B 16 MiB each, C 512 MiB): 8192 tiles of
    128 x 256 with only 8 K steps each; 300 x 520 x 72 smoke (9 tiles over 3 programs, a partial K step)."""
    m, n, k = context().size((16384, 16384, 512), (300, 520, 72))
    return matmul_operands(m, n, k)


# --- tma_loads: operands through tensor descriptors -------------------------------------------------


@triton.jit
def matmul_tma_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """C = A @ B like chapter 8's ``matmul_kernel``, the tiles moved by tensor descriptors: on sm_90 each
    load is one TMA bulk copy into shared memory issued by one thread, bounds handled by the copy engine
    (out-of-range rows, columns and K are read as zeros and never written)."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.full([BLOCK_M, BLOCK_N], 0.0, tl.float32)  # not tl.zeros: see chapters.ch08.common.add
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc = dot(a, b, acc, UPCAST)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


def tma_matmul(num_stages: int = 4, group_m: int = 8) -> Launch:
    """Launch ``matmul_tma_kernel`` with TILE tiles on 8 warps; descriptors built on the host per call (µs)."""
    from triton.tools.tensor_descriptor import TensorDescriptor  # triton >= 3.4

    def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = TILE
        descs = (
            TensorDescriptor.from_tensor(a, [bm, bk]),
            TensorDescriptor.from_tensor(b, [bk, bn]),
            TensorDescriptor.from_tensor(out, [bm, bn]),
        )
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        matmul_tma_kernel[grid](
            *descs, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m,
            UPCAST=interpreted(matmul_tma_kernel), num_warps=8, num_stages=num_stages,
        )  # fmt: skip

    return launch


# --- persistent_tiles: one program per SM walking the tiles -----------------------------------------


@triton.jit
def matmul_persistent_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """C = A @ B with chapter 8's tiles, loads and K order, but P programs (one per SM) that take tiles
    p, p + P, p + 2P, ... in the grouped order. ``flatten=True`` lets Triton's pipeliner treat the tile
    loop and the K loop as one loop, so the next tile's first loads are issued during this tile's last
    K steps and its epilogue."""
    tiles = ((M + BLOCK_M - 1) // BLOCK_M) * ((N + BLOCK_N - 1) // BLOCK_N)
    # The store's tile is counted separately from the loads' (as triton's persistent-matmul tutorial does),
    # so that the flattened loop does not keep the loads' tile indices live across the K steps.
    store_tile = tl.program_id(0) - tl.num_programs(0)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=True):
        pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tile_product(a_ptr, b_ptr, rows, cols, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, UPCAST)
        store_tile += tl.num_programs(0)
        pid_m, pid_n = grouped_tile(store_tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def persistent_matmul(num_stages: int = 3, group_m: int = 8, programs: int | None = None) -> Launch:
    """Launch ``matmul_persistent_kernel`` with TILE tiles on 8 warps, one program per SM (or ``programs``)."""

    def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = TILE
        grid = min(programs or programs_per_sm(), triton.cdiv(m, bm) * triton.cdiv(n, bn))
        matmul_persistent_kernel[(grid,)](
            a, b, out, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m,
            UPCAST=interpreted(matmul_persistent_kernel), num_warps=8, num_stages=num_stages,
        )  # fmt: skip

    return launch


# --- h2d_double_buffering: a batch streamed from the host, chunk by chunk --------------------------------


class Streamed:
    """out[rows of chunk c] = host_x[rows of chunk c] @ W for every chunk, the chunks copied from pinned
    host memory as they are needed (a dataset larger than what one keeps on the device, or inputs that
    arrive from the host each step).

    Full size: 32768 rows of 8192 bf16 (512 MiB pinned on the host) in 8 chunks of 64 MiB, W 8192 x
    8192 bf16 (128 MiB), out 512 MiB: 4.4 TFLOP of matmul against 512 MiB over PCIe. Smoke: 13 rows of
    24 in chunks of 5 (5, 5, 3). Subclasses say how a call moves the chunks (``benchmark_fn``). On a
    CPU there is no copy engine and no overlap: both sides run the same copies and products in turn.

    Setup also times one plain pinned copy of the whole batch (CUDA events, untimed by the harness),
    records it as ``h2d_gbps`` and states it as the pair's ceiling (``get_work()``): no call can be faster
    than its copies; the optimized side is to reach 80 % of that bound.
    """

    def setup(self) -> None:
        ctx = context()
        self.device = ctx.device
        rows, width, self.chunk = ctx.size((32768, 8192, 4096), (13, 24, 5))
        cpu = torch.device("cpu")
        x = torch.randn(rows, width, generator=generator(0, cpu)).bfloat16()
        self.host_x = x.pin_memory() if ctx.is_cuda else x  # page-locked: copied by DMA, asynchronously
        self.w = (torch.randn(width, width, generator=generator(1, cpu)) / width**0.5).bfloat16().to(self.device)
        self.out = torch.empty(rows, width, device=self.device, dtype=torch.bfloat16)
        self.work = {"bytes": 2 * (2 * rows * width + width * width), "flops": 2 * rows * width * width}
        self.prepare()
        if ctx.is_cuda:
            copy_ms = time_alone(lambda: self.out.copy_(self.host_x, non_blocking=True))
            gbps = ctx.record("h2d_gbps", round(2 * rows * width / (copy_ms * 1e6), 1))
            what = f"the batch's host-to-device copies at the PCIe rate measured in setup ({gbps} GB/s)"
            self.work |= stated_ceiling(what, copy_ms)

    def prepare(self) -> None:
        """Allocate the device staging buffer(s) (called at the end of setup)."""
        raise NotImplementedError

    def chunks(self) -> list[slice]:
        rows = self.host_x.shape[0]
        return [slice(r, min(r + self.chunk, rows)) for r in range(0, rows, self.chunk)]

    def benchmark_fn(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        del self.host_x, self.w, self.out

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch and the weights; the staging buffers are scratch that every call overwrites."""
        return self.host_x, self.w

    def get_work(self) -> dict[str, float | str]:
        return self.work
