"""Transpose with 1-D row blocks: reads coalesced, writes strided by the row length.

Program (r, j) copies BLOCK consecutive elements of row r of x (M x N) into column r of out (N x M).
The load is coalesced, but lanes store to out[c, r], M elements (32 KiB for M = 8192) apart: each
warp-wide store touches 32 sectors to write 4 bytes of each, 8x the sectors of a coalesced store
(programs for neighbouring rows fill in the rest of each sector). Expected: several times slower
than the tiled version; measured on an H100: 6.6x slower, 440 GB/s (README.md, measured history).

Traffic (minimum): read 4MN + write 4MN bytes, 8192 x 8192 fp32 -> 512 MiB per call.
"""

import torch
import triton
import triton.language as tl

from chapters.ch07.common import BLOCK, Example, matrix


@triton.jit
def transpose_rows(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    v = tl.load(x_ptr + row * N + cols, mask=mask)
    tl.store(out_ptr + cols * M + row, v, mask=mask)


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    m, n = x.shape
    transpose_rows[(m, triton.cdiv(n, BLOCK))](x, out, m, n, BLOCK=BLOCK)


def get_benchmark() -> Example:
    return Example(matrix, launch)
