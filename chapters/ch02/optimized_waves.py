"""The same kernel and elements on exactly SMs programs: one full wave, every SM busy to the end.

The one idea: size the grid from the SM count (ctx.facts.cores), not from the data's natural chunk.
The same n elements are split over 132 programs on an H100 instead of 133 (each program 1/132 more work,
rounded up to whole tiles), so every SM runs one program and they all finish together. Only the grid
changes: same kernel, same per-element arithmetic, bitwise equal outputs.

Expected on an H100: ~1.01 ms instead of ~2 ms: ~1.95x faster (2 x SMs / (SMs + 1)), close to the SMs'
fp32 FMA rate over the whole kernel (the ceiling here; `perflab peak`'s fp32 figure is a matmul's,
~51 TFLOP/s measured, the FMA pipes' nominal figure ~67).

Work per call: as the baseline (common.wave_problem).
"""

from functools import partial

from chapters.ch02.common import Example, iterate_launch, wave_problem


def get_benchmark() -> Example:
    return Example(partial(wave_problem, full_wave=True), iterate_launch)
