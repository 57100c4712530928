"""Matmul without reuse: C = A @ B (fp32), each program one row of C, BLOCK_N columns, k by k.

Program (m, j) walks k = 0 .. K-1: one scalar A[m, k] (broadcast to every lane) times the row
segment B[k, j*BLOCK_N : (j+1)*BLOCK_N], accumulated in fp32 FMAs. Every B element a program
loads feeds exactly one FMA, so all of B (64 MiB) is read once per row of C: M*K*N*4 bytes =
256 GiB per call at 4096^3, served by L1/L2 (B never fits in L1; DRAM sees B about once per
wave). The loads, not the arithmetic, set the pace: one 4-byte load per 2 flops.

Predicted (not measured): bound by L1/L2 bandwidth at tens of ms per call on an H100 (well under
0.5 s), 4-10x slower than the tiled version.
Measured on an H100 (2026-11-21): 23.5 ms per call, 7.37x slower than the tiled version (run 0b39ff5f).

Traffic (minimum): read A and B once, write C once, 4(MK + KN + MN) bytes (192 MiB at 4096^3);
2MNK flops (137 GFLOP).
"""

import torch
import triton
import triton.language as tl

from chapters.ch07.common import Example, matmul_operands

BLOCK_N = 128


@triton.jit
def matmul_rows(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_N: tl.constexpr):
    m = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.full([BLOCK_N], 0.0, tl.float32)  # not tl.zeros: see common.add
    for k in range(K):
        acc += tl.load(a_ptr + m * K + k) * tl.load(b_ptr + k * N + cols, mask=mask, other=0.0)
    tl.store(c_ptr + m * N + cols, acc, mask=mask)


def launch(ab: tuple[torch.Tensor, torch.Tensor], c: torch.Tensor) -> None:
    a, b = ab
    (m, k), n = a.shape, b.shape[1]
    matmul_rows[(m, triton.cdiv(n, BLOCK_N))](a, b, c, m, n, k, BLOCK_N=BLOCK_N, num_warps=4)


def get_benchmark() -> Example:
    return Example(matmul_operands, launch)
