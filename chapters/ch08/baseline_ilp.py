"""One dependency chain per thread: each FMA waits for the previous one's result.

Every element goes through a chain of 1024 FMAs, x <- x * a + b, where each step needs the one
before. The launch is persistent: one program of 4 warps per SM (132 on an H100), walking the
vector block by block; the kernel's occupancy is held there on purpose, as it is for kernels whose
registers or shared memory allow one block per SM. With BLOCK = 128 each thread carries one element,
so each SM sub-partition (scheduler) has one warp with one chain: it issues an FMA, then waits out
the FMA latency (~4 cycles on Hopper) before the next can issue. The FP32 pipe is busy 1 cycle in 4.

Predicted (not measured): ~25 % of the FMA issue rate, 3-5x slower than the 8-chain version on an
H100 (plus each block's load latency, ~1 µs against ~2.3 µs of chain per block).

Work (minimum): 4 Mi elements, read and written once (32 MiB); 1024 FMAs each = 8.6 GFLOP.
"""

from chapters.ch08.common import Example, chain_inputs, chains_launch


def get_benchmark() -> Example:
    return Example(chain_inputs, chains_launch(elements_per_thread=1))
