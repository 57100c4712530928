"""A 128 x 256 bf16 matmul tile on Triton's default 4 warps: the accumulator does not fit in registers.

C = A @ B at 8192³ (bf16 in, fp32 accumulate), one 128 x 256 tile of C per program, BLOCK_K 64,
3 pipeline stages, launched with ``num_warps=4``, Triton's default. The fp32 accumulator of a
128 x 256 tile is 32 Ki values; spread over 4 warps (128 threads) that is 256 registers per thread
for the accumulator alone, above the 255 a thread can address. ptxas (sm_90, triton 3.9, compiled
without a GPU: tests/chapters/test_ch08_kernels.py) gives the kernel 255 registers and 816 bytes of
spill stack per thread: part of the accumulator lives in local memory and goes back and forth
through L1/L2 on every K step, beside the 144 KiB of shared memory the three stages use.

Predicted (not measured): several times slower than the 8-warp version on an H100 (3-10x: each
128 x 256 x 64 step does 4.2 MFLOP on the tensor cores, and moving even part of a 128 KiB
accumulator through L1/L2 costs more than that).

Work (minimum): read A and B once, write C once, 2(MK + KN + MN) bytes = 384 MiB; 2MNK = 1.1 TFLOP.
"""

from chapters.ch08.common import Example, matmul, square_matmul


def get_benchmark() -> Example:
    return Example(square_matmul, matmul(block=(128, 256, 64), num_warps=4, num_stages=3))
