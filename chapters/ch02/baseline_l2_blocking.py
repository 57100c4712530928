"""PASSES passes of an elementwise map over a working set of 8x L2, each pass streaming all of it.

The eager way to run a chain of memory-bound ops: one kernel per op over the whole tensor. Pass 1 reads
x and writes out, passes 2..8 read and write out in place. The tensor is 8x the L2 (400 MiB on an H100,
L2 50 MiB), so by the time a pass comes back to an element, that element's line was evicted long ago:
every pass moves 8 B per element between HBM and the SMs.

Expected on an H100: 8 passes x 800 MiB = 6.7 GB at ~3.0 TB/s (the measured copy bandwidth), ~2.2 ms;
achieved GB/s (the passes' traffic / time) close to the copy bandwidth, which is this side's ceiling.

Work per call (both sides): PASSES x (read + write) x 4 B per element = 6.7 GB, 4 flops per element per
pass (common.relax_problem).
"""

import torch

from chapters.ch02.common import Example, relax_pass, relax_problem


def launch(inp: tuple[torch.Tensor, int, int], out: torch.Tensor) -> None:
    x, _, passes = inp
    relax_pass(x, out)
    for _ in range(passes - 1):
        relax_pass(out, out)


def get_benchmark() -> Example:
    return Example(relax_problem, launch)
