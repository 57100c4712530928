"""bf16 matmul with one program per output tile: each tile starts with an empty pipeline and ends idle.

C = A @ B with M = N = 16384, K = 512: 8192 tiles of 128 x 256, each only 8 K steps of 64 (chapter
8's kernel, 8 warps, 3 stages). A program fills its pipeline (two steps' loads before the first
multiply), runs 8 steps (~6 µs of tensor-core work), then converts and stores its 64 KiB tile while
its SM's tensor cores wait; one program fits per SM, so the next one starts only after and fills its
pipeline again. With K this short, fill and epilogue are a third of each tile's time or more (the
C tile it writes is as many bytes as the A and B tiles it reads).

Predicted: 1.1-1.2x slower than the persistent version on an H100 (scripts/timing/tiles_probe.py
times both schedules at K from 256 to 2048: the shorter K, the larger the gain; at K = 2048 none).

Work (minimum): read A and B once (32 MiB), write C once (512 MiB); 2MNK = 275 GFLOP.
"""

from chapters.ch10.common import TILE, Example, matmul, short_k_matmul


def get_benchmark() -> Example:
    return Example(short_k_matmul, matmul(block=TILE, num_warps=8, num_stages=3))
