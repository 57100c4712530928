"""bf16 matmul without software pipelining (num_stages=1): each K step's loads wait for the last step's math.

C = A @ B at 8192³, chapter 8's kernel with 128 x 256 x 64 tiles on 8 warps, launched with
``num_stages=1``. Compiled for sm_90 (triton 3.9, no GPU) the K loop then has one 48 KiB shared-
memory buffer and plain global loads (no cp.async): step k+1's tiles cannot be fetched before step
k's tensor-core instructions have read the buffer, so every step pays a full global-memory round
trip (~1 µs, L2 hits included) on top of its ~0.7 µs of tensor-core work. One program fits per SM
(226 registers x 256 threads, ptxas sm_90), so no other program hides the wait.

Predicted (not measured): 1.5-2.5x slower than the 4-stage version on an H100.

Work (minimum): read A and B once, write C once, 384 MiB; 2MNK = 1.1 TFLOP.
"""

from chapters.ch10.common import TILE, Example, matmul, square_matmul


def get_benchmark() -> Example:
    return Example(square_matmul, matmul(block=TILE, num_warps=8, num_stages=1))
