"""bf16 matmul with one program per output tile: each tile starts with an empty pipeline and ends idle.

C = A @ B with M = N = 16384, K = 1024: 8192 tiles of 128 x 256, each only 16 K steps of 64 (chapter
8's kernel, 8 warps, 3 stages). A program fills its pipeline (two steps' loads before the first
multiply), runs 16 steps (~11 µs of tensor-core work), then converts and stores its 64 KiB tile
while its SM's tensor cores wait; one program fits per SM, so the next one starts only after and
fills its pipeline again. With K this short, fill and epilogue are ~15-25 % of each tile's time.

Predicted (not measured): 1.1-1.3x slower than the persistent version on an H100.

Work (minimum): read A and B once (64 MiB), write C once (512 MiB); 2MNK = 550 GFLOP.
"""

from chapters.ch10.common import TILE, Example, matmul, short_k_matmul


def get_benchmark() -> Example:
    return Example(short_k_matmul, matmul(block=TILE, num_warps=8, num_stages=3))
