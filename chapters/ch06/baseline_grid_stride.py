"""A 256-bin histogram with one program per 512-element block: 128 Ki programs, each flushing 256 bins.

Each program counts its block into a private histogram (tl.histogram: warp ballots and shared memory)
and adds all 256 bins to the global histogram with atomics. The flush is the same size whatever the
block: 256 atomics (1 KiB, 8 lines that every program hits) per 2 KiB of data read, so on an H100 the
L2's atomic units see 33.5 M atomic adds on the same 256 counters per call, beside the 250 MiB stream.
Expected on an H100: the read alone ~85 us at the copy bandwidth; with 128 Ki flushes and as many
block start-ups, ~1.5-3x that (an estimate: the L2's throughput for atomics on a few hot lines is
what decides it; ncu's lts__t_sectors_op_red would show it).

Work per call (both sides): read x once (4 B per element), write 256 counts (common.histogram_problem).
"""

from chapters.ch06.common import Example, block_programs, histogram_launch, histogram_problem


def get_benchmark() -> Example:
    return Example(histogram_problem, histogram_launch(block_programs))
