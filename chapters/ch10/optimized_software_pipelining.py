"""The same bf16 matmul with a 4-stage software pipeline: three K steps' tiles in flight while one is multiplied.

The one change is ``num_stages=4``: Triton's pipeliner rewrites the K loop with a ring of four
shared-memory buffers (4 x 48 KiB = 192 KiB, of the 227 KiB an H100 SM offers) filled by
asynchronous copies (cp.async) issued three steps ahead, so the tensor cores find step k's tiles
already on chip and the load latency overlaps the math of the steps before (ptxas, sm_90: cp.async
in the loop, 196 registers, no spills; tests/chapters/test_ch10_kernels.py checks both forms). Same
tiles, same K order: outputs should equal the baseline's (compared at the default bf16 rtol).

Predicted (not measured): 1.5-2.5x faster than the baseline on an H100, >= 60 % of the bf16 matmul
peak (~480+ TFLOP/s, <= 2.3 ms per call).

Work (minimum): as the baseline, 384 MiB and 1.1 TFLOP per call.
"""

from chapters.ch10.common import TILE, Example, matmul, square_matmul


def get_benchmark() -> Example:
    return Example(square_matmul, matmul(block=TILE, num_warps=8, num_stages=4))
