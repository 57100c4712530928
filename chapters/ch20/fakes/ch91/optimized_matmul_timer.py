"""Fake: the clock replaced. The honest kernel, but setup() makes the host clock and CUDA events read a
thousandth of the real time: "1000x faster".

Expected verdict: invalid, "timer replaced: time.perf_counter" (and, on a GPU, torch.cuda.Event.elapsed_time):
the harness binds its clocks before any benchmark code runs and checks them after set-up.
"""

import time

import torch

from chapters.ch20.fakes.ch91.common import Matmul

_real = time.perf_counter


class Timer(Matmul):
    def setup(self) -> None:
        super().setup()
        start = _real()
        time.perf_counter = lambda: start + (_real() - start) / 1000.0
        elapsed = torch.cuda.Event.elapsed_time
        torch.cuda.Event.elapsed_time = lambda self, end: elapsed(self, end) / 1000.0


def get_benchmark() -> Timer:
    return Timer()
