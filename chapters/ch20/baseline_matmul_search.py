"""bf16 matmul at 8192³ with a hand-picked configuration: 64 x 64 x 32 tiles, 4 warps, 3 stages.

C = A @ B through ``common.matmul_kernel`` with the square 64 x 64 tile of the Triton tutorial's smallest
configuration: a safe choice that compiles everywhere. Per K step a program loads 64 x 32 of A and 32 x 64
of B (8 KiB) for 2 * 64 * 64 * 32 = 262 kFLOP: 32 FLOP per byte from L2, and 16,384 programs each with a
prologue, an epilogue and m64n64 tensor-core instructions.

Predicted on an H100 (not measured): like chapter 9's 64 x 64 tiles (predicted there at ~300-450 TFLOP/s,
L2-bound at 32 FLOP/B), ~2.5-3.5 ms per call. Clock: the default (CUDA events, L2 flushed). Work per
call (minimum): read A and B once, write C once, 384 MiB; 2MNK = 1.1 TFLOP.
"""

from chapters.ch20.common import MATMUL_DEFAULT, Example, fixed_matmul, square_matmul


def get_benchmark() -> Example:
    return Example(square_matmul, fixed_matmul(MATMUL_DEFAULT))
