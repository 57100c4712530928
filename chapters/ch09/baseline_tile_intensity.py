"""bf16 matmul with 64 x 64 tiles: each byte brought to an SM feeds 32 flops, and L2 cannot keep up.

C = A @ B at 8192³, chapter 8's Triton kernel with 64 x 64 x 64 tiles (4 warps, 3 stages). Per K
step a program loads a 64 x 64 tile of A and one of B (16 KiB) and does 2 * 64³ = 0.5 MFLOP: an
on-chip intensity of 32 FLOP/B against L2. Across the grid every A element is loaded N / 64 = 128
times and every B element 128 times: 32 GiB from L2 per call. At ~14 TB/s of measured L2 bandwidth
that alone takes ~2.5 ms, a ceiling of ~450 TFLOP/s, before the smaller tensor-core instructions
(m64n64) and 4x the programs' prologues and epilogues are counted.

DRAM sees the same minimum either way (A, B read once, C written once when the tiles are grouped
for L2 reuse), so on the roofline both sides sit at the same intensity; the difference is the L2
roof under it.

Predicted (not measured): 1.4-2x slower than the 128 x 256 tiles on an H100, ~300-450 TFLOP/s.

Work (minimum): read A and B once, write C once, 384 MiB; 2MNK = 1.1 TFLOP.
"""

from chapters.ch09.common import Example, matmul, square_matmul


def get_benchmark() -> Example:
    return Example(square_matmul, matmul(block=(64, 64, 64), num_warps=4, num_stages=3))
