"""Requests of 24 different sizes, each run eagerly at its own shape: ~25-40 kernel launches per request.

Each request (common.Requests: 1-64 rows through 4 residual MLP blocks, width 512) is a handful of µs of GPU
work per kernel, launched one kernel at a time from Python. Eager execution takes any shape, which is why
servers start this way; a CUDA graph does not (a graph replays fixed shapes), and one graph per distinct
size would mean up to 64 captures and their memory. Expected on an H100: ~30 launches x ~15-20 µs ≈
0.5 ms per request, ~10-14 ms per call, launch-bound.

Timed with the wall clock (timing_mode="cpu"): the launch gaps are the cost the optimized side removes.
Work per call: the useful rows (common.Requests).
"""

from chapters.ch12.common import Requests


def get_benchmark() -> Requests:
    return Requests()
