"""The same 64 kernels launched back to back, one synchronize at the end.

The one idea: a launch only queues the kernel; the host can go on launching while the GPU runs. The
kernels still run one after another, in stream order (each reads the one before's output, as in the
baseline: same kernels, same order, bitwise-equal outputs), but the host is no longer in the loop between
them: it queues the next kernel while the current one runs, and waits once, when the result is needed.

Expected on an H100 host: each step costs the larger of the host's launch (~8.5 us) and the kernel
(~8-17 us), not their sum plus a synchronize: 64 x ~9-17 us ~ 0.6-1.1 ms, ~1.8-2.8x faster. Ceiling: the
kernels' own time back to back, which this reaches while each kernel takes longer than a launch; below
that the host's launch rate is the bound (what CUDA graphs lift: chapter 12). On a CPU-only machine
synchronize is a no-op (a Python call per step) and both sides run the same ops: equal outputs, and
nothing to learn from the times.

Timed with the wall clock, as the baseline. Work per call: as the baseline (common.decay_chain).
"""

import torch

from chapters.ch06.common import STEPS, Example, decay_chain, decay_step, synchronize, wall_clock


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    prev = x
    for _ in range(STEPS):
        decay_step(x, prev, out)
        prev = out
    synchronize(out.device)  # once, when the result is needed


def get_benchmark() -> Example:
    return Example(decay_chain, launch, wall_clock())
