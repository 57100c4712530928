"""Eight independent chains per thread: the scheduler issues one chain's FMA while the others' are in flight.

Same kernel, same grid (one 4-warp program per SM), same chain per element; the one change is
BLOCK = 1024, so each thread holds 8 elements and advances 8 independent chains step by step. An
FMA of chain j no longer waits for anything but chain j's previous step, issued 8 instructions ago:
more than the ~4-cycle latency, so the FP32 pipe can issue every cycle with the same one warp per
scheduler (Volkov: instruction-level parallelism in place of occupancy). Each element sees the same
FMAs in the same order: outputs equal bit for bit.

Predicted (not measured): 3-5x faster than the baseline on an H100, near the FMA issue rate
(132 SMs x 128 lanes x 2 flop x ~1.75 GHz ≈ 59 TFLOP/s; the measured fp32 *matmul* ceiling, 51
TFLOP/s, is below it), ~0.15-0.2 ms per call.

Work (minimum): as the baseline, 32 MiB and 8.6 GFLOP per call.
"""

from chapters.ch08.common import Example, chain_inputs, chains_launch


def get_benchmark() -> Example:
    return Example(chain_inputs, chains_launch(elements_per_thread=8))
