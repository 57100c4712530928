"""bf16 matmul with pointer-based tile loads: every thread computes addresses and masks for its share.

C = A @ B at 8192³, chapter 8's kernel with 128 x 256 x 64 tiles on 8 warps and 4 pipeline stages.
Each K step moves 48 KiB per program with cp.async: the 256 threads each compute 24 16-byte addresses
and their bounds masks, issue the copies, and wait on them, registers and issue slots taken from the
math around it.

Predicted (not measured): 1.05-1.25x slower than the TMA version on an H100 (the pipelined pointer
kernel is already near the tensor cores' rate; this pair is the chapter's narrowest).

Work (minimum): read A and B once, write C once, 384 MiB; 2MNK = 1.1 TFLOP.
"""

from chapters.ch10.common import TILE, Example, matmul, square_matmul


def get_benchmark() -> Example:
    return Example(square_matmul, matmul(block=TILE, num_warps=8, num_stages=4))
