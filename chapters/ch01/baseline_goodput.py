"""A loop with avoidable overhead: 16 steps of h = tanh(h @ W_n), plus two kinds of waste per step.

Per step the useful work is one 256 x 4096 x 4096 matmul (8.6 GFLOP, ~0.17 ms at ~50 TFLOP/s fp32)
and a tanh. The step also
  * recomputes the constant W_n = W * sqrt(width) / ‖W‖ (a norm and a scale: reads the 64 MiB W
    twice and writes 64 MiB, ~0.07 ms at ~3 TB/s), the same value every step;
  * checks health with ``.item()``: the host waits until the GPU has drained, then launches the
    next step into an idle GPU (a round trip of tens of microseconds, plus the reduction kernel).
Goodput = useful FLOPs / wall time. get_work counts only the matmuls, so the harness's achieved
TFLOP/s *is* the goodput. Expected on an H100: ~0.25-0.3 ms per step, a goodput of ~60-70% of
what the matmuls alone would run at.

Timed with the wall clock (timing_mode="cpu"): the host syncs are part of the waste.

Work per call (useful, both sides): 16 x 8.6 = 137 GFLOP; minimum traffic read h0 and W, write
out = 72 MiB (common.recurrence).
"""

import torch

from chapters.ch01.common import Example, check_finite, normalized, recurrence, wall_clock


def launch(h0: torch.Tensor, w: torch.Tensor, steps: int, out: torch.Tensor) -> None:
    h = h0
    for _ in range(steps):
        w_n = normalized(w)  # the same constant, recomputed every step
        h = torch.tanh(h @ w_n)
        check_finite(h)  # a host sync every step
    out.copy_(h)


def get_benchmark() -> Example:
    return Example(recurrence, launch, wall_clock())
