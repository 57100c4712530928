"""The same useful work without the overhead: the constant hoisted, one health check per call.

The one idea: do per call what only needs doing per call. W_n is computed once (it does not change
inside the loop) and the finiteness check runs once, on the final h, so the host enqueues all 16
steps without waiting and the GPU runs them back to back. The check still runs, and still raises
on divergence; it reports it after the last step instead of at the step where it happened.
Expected on an H100: close to the matmuls alone (~0.17 ms per step, goodput near the fp32 matmul
rate), ~1.5x faster than the baseline. Same matmuls on the same W_n: outputs equal.

Timed with the wall clock, as the baseline.

Work per call (useful): as the baseline, 137 GFLOP (common.recurrence).
"""

import torch

from chapters.ch01.common import Example, check_finite, normalized, recurrence, wall_clock


def launch(h0: torch.Tensor, w: torch.Tensor, steps: int, out: torch.Tensor) -> None:
    w_n = normalized(w)
    h = h0
    for _ in range(steps):
        h = torch.tanh(h @ w_n)
    check_finite(h)
    out.copy_(h)


def get_benchmark() -> Example:
    return Example(recurrence, launch, wall_clock())
