"""The same piecewise function branch-free: each lane looks up its piece's coefficients, then one chain.

The pieces differ only in their coefficients, so the branch becomes data: each lane loads a_k and
b_k for its own piece (two loads from a 32-byte table, L1 hits) and every lane runs the same single
256-step chain. No lane waits on a branch it does not take: a quarter of the baseline's FMAs. Each
element goes through exactly the FMAs the baseline kept for it: outputs equal bit for bit.

Predicted (not measured): 3-4x faster than the baseline on an H100, near the FP32 FMA issue rate
(~59 TFLOP/s at ~1.75 GHz; the fp32 matmul ceiling of 51 TFLOP/s is not this kernel's roof),
~0.15-0.2 ms per call; the 128 MiB it moves would take ~45 µs, so it stays compute-bound.

Work (minimum): as the baseline, 128 MiB and 8.6 GFLOP per call.
"""

import triton
import triton.language as tl

from chapters.ch08.common import Example, affine_chain, first_operand, piece_index, piecewise_inputs, piecewise_launch


@triton.jit
def piecewise_branch_free(x_ptr, a_ptr, b_ptr, out_ptr, n, trips, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(x_ptr + idx, mask=mask, other=0.0)
    piece = piece_index(x)
    y = affine_chain(x, tl.load(a_ptr + piece), tl.load(b_ptr + piece), trips)
    tl.store(out_ptr + idx, y, mask=mask)


def get_benchmark() -> Example:
    return Example(piecewise_inputs, piecewise_launch(piecewise_branch_free), inputs=first_operand)  # a, b: constants
