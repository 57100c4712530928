"""A piecewise function written as branches: every program runs every branch any of its lanes takes.

out = f_k(x) where k is x's piece (x < -1, [-1, 0), [0, 1), x >= 1) and f_k is 256 steps of
x <- x * a_k + b_k. Written the way a CUDA kernel's ``if / else if`` runs on SIMT hardware: for
each piece, if any lane of the program is in it (a uniform branch), the whole program runs that
piece's chain and keeps the result in the lanes that belong to it. With N(0, 1) inputs in random
order every block of 1024 elements (and every warp of 32: a piece of 16 % is missing from a warp
only 0.4 % of the time) holds all four pieces, so every element pays for four chains and keeps one.

Predicted (not measured): ~4x the FMAs of the branch-free version, 3-4x slower on an H100 (the
branch-free one is bound by the FP32 pipe too: 256 FMAs against 8 bytes per element).

Work (minimum): 16 Mi elements read and written once (128 MiB); one 256-FMA chain per element,
8.6 GFLOP (this version executes ~34 GFLOP of FMAs to produce it).
"""

import triton
import triton.language as tl

from chapters.ch08.common import (
    Example,
    affine_chain,
    first_operand,
    maximum,
    piece_index,
    piecewise_inputs,
    piecewise_launch,
)


@triton.jit
def piecewise_branchy(x_ptr, a_ptr, b_ptr, out_ptr, n, trips, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(x_ptr + idx, mask=mask, other=0.0)
    piece = piece_index(x)
    y = x
    for k in tl.static_range(4):
        taken = (piece == k) & mask
        if tl.reduce(taken.to(tl.int32), 0, maximum) > 0:  # some lane needs piece k: all lanes run it
            y = tl.where(taken, affine_chain(x, tl.load(a_ptr + k), tl.load(b_ptr + k), trips), y)
    tl.store(out_ptr + idx, y, mask=mask)


def get_benchmark() -> Example:
    return Example(piecewise_inputs, piecewise_launch(piecewise_branchy), inputs=first_operand)  # a, b: constants
