"""A compute-bound kernel on SMs + 1 programs: the last one runs alone, a second wave for one program.

Every element of x goes through 512 dependent FMAs (z = z * a + b); each program owns a contiguous range
of 107 tiles of 4096 elements, the size the work came in. The problem is (SMs + 1) such ranges, so the
grid has 133 programs on an H100's 132 SMs. One program (16 warps, 8 independent FMAs per thread) keeps
its SM's four schedulers busy, so the SM that receives two programs takes twice as long as every other
SM, and the kernel lasts two program-times while 131 SMs idle for the second: the tail effect.

Expected on an H100: ~1 ms per program at an SM's fp32 FMA rate (128 lanes x ~1.75 GHz), ~2 ms per call,
about half the fp32 FMA peak over the whole kernel.

Work per call (both sides): 2 x 512 flops per element, x read and out written once (common.wave_problem).
"""

from functools import partial

from chapters.ch02.common import Example, iterate_launch, wave_problem


def get_benchmark() -> Example:
    return Example(partial(wave_problem, full_wave=False), iterate_launch)
