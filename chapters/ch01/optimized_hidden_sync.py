"""The same loop with what the profile showed removed: the metric computed without a data-dependent shape.

The one idea: keep the shapes fixed so the host never needs a value from the device. The mean of the positive
entries is their masked sum over their count, ``where(h > 0, h, 0).sum() / (h > 0).sum()``: the same number
(summed in another order: ~1e-7 relative), computed by fixed-size reductions the host launches without waiting.
The host now runs ahead of the GPU and the profile shows no ``aten::nonzero`` and no ``cudaStreamSynchronize``
inside the loop: kernels back to back, the host's launches hidden behind them.

Expected on an H100: close to the stated ceiling (the call's kernels alone, timed in setup; target 80 %),
~1.3-1.6x faster than the baseline.

Timed and counted as the baseline (common.positive_means).
"""

from chapters.ch01.common import Example, positive_means, positive_means_on_device, wall_clock


def get_benchmark() -> Example:
    return Example(positive_means, positive_means_on_device, wall_clock())
