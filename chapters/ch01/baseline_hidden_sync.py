"""A loop whose profile shows the GPU waiting on the host: a synchronisation hidden in an indexing expression.

Per step: h = tanh(h @ W) (256 x 2048 x 2048 fp32, ~2 GFLOP, ~50-60 µs on an H100), then the step's metric, the
mean of h's positive entries, written as a NumPy user would: ``h[h > 0].mean()``. Nothing in the code asks the
host to wait, yet boolean-mask indexing must learn how many entries pass before it can allocate its result:
``aten::nonzero`` copies the count to the host and synchronises the stream (torch.profiler's trace of one call:
64 ``aten::nonzero`` each ending in ``cudaStreamSynchronize``, and the GPU idle after each while the host wakes
and launches the next step; ``perflab run -t ch1:hidden_sync --profile`` writes that trace and its top ops, and
``torch.cuda.set_sync_debug_mode("warn")`` names the line). Each step therefore costs its kernels plus a round
trip: the host's wake-up, the copy, the next launches into an idle GPU.

Expected on an H100: ~20-40 µs of idle GPU per step on ~60 µs of kernels, ~1.3-1.6x the sync-free call's
device time (the stated ceiling, timed in setup).

Timed with the wall clock (timing_mode="cpu"): the host waits are what the pair is about.
Work per call (useful, both sides): 64 x 2.1 = 137 GFLOP; minimum traffic read h0 and W, write the 64 metrics
(common.positive_means).
"""

import torch

from chapters.ch01.common import Example, positive_means, wall_clock


def launch(h0: torch.Tensor, w: torch.Tensor, steps: int, out: torch.Tensor) -> None:
    h = h0
    for i in range(steps):
        h = torch.tanh(h @ w)
        out[i] = h[h > 0].mean()  # boolean indexing: a data-dependent shape, so a host sync per step


def get_benchmark() -> Example:
    return Example(positive_means, launch, wall_clock())
