"""The same kernel on a persistent grid: 16 programs per SM, each looping over every 2112th block.

The one idea: a grid-stride loop. The grid is sized from the SM count (ctx.facts.cores), not from the
data: 2112 programs on an H100, each walking blocks p, p + 2112, p + 4224, ... and accumulating them into
its private histogram, then flushing it once. Flushes fall from 128 Ki to 2112 (541 K atomics instead of
33.5 M), and block start-ups with them; consecutive programs still read consecutive blocks, so the
stream stays coalesced. Same kernel, same counts (integer adds: exact, in any order).

Its ceiling is not the copy bandwidth: ``tl.histogram`` counts a block by comparing every element with
every bin (O(BINS) work per element), and that, not the loads, bounds the kernel. Measured on an H100
(scripts/timing/histogram_probe.py): the same loop with a sum instead of the count reads 2630 GB/s, the
count 800-1003 GB/s whatever the block size, warps or pipelining; 16 programs per SM is the fastest grid
tried (4: 800 GB/s). Expected: ~260 us, ~1000 GB/s (~35 % of the copy bandwidth); ~10x the baseline.

Work per call: as the baseline (common.histogram_problem).
"""

from chapters.ch06.common import Example, histogram_launch, histogram_problem, persistent_programs


def get_benchmark() -> Example:
    return Example(histogram_problem, histogram_launch(persistent_programs))
