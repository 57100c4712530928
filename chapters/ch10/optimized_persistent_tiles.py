"""bf16 matmul with persistent programs: one per SM, each walking its tiles with a flattened pipeline.

Same tiles, loads, stages and K order; the one change is the schedule: 132 programs (one per SM on an
H100) each take every 132nd tile of the grouped order, and the tile loop and K loop form one flattened
loop (``tl.range(..., flatten=True)``) that Triton's pipeliner treats as a single stream of K steps.
The next tile's first loads are issued while the current tile's last steps multiply and its epilogue
stores, so the pipeline is filled once per program instead of once per tile, and no launch of a new
program sits between tiles (ptxas, sm_90, triton 3.9: 218 registers and 176 KiB of shared memory,
the per-tile kernel 197 and 144 KiB: one program per SM either way). Outputs should equal the
baseline's (compared at the default bf16 rtol).

Predicted: 1.1-1.2x faster than the baseline on an H100, >= 60 % of the bf16 matmul peak (~450+
TFLOP/s, <= 0.6 ms per call).

Work (minimum): as the baseline, 544 MiB and 275 GFLOP per call.
"""

from chapters.ch10.common import Example, persistent_matmul, short_k_matmul


def get_benchmark() -> Example:
    return Example(short_k_matmul, persistent_matmul(num_stages=3))
