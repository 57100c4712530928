"""An elementwise chain as separate PyTorch ops: out = relu(x * A + B) * C in four passes.

Each op is its own kernel and writes its full-size result to DRAM for the next one to read back:
    x * A      read 4N, write 4N
    + B        read 4N, write 4N
    relu       read 4N, write 4N
    * C        read 4N, write 4N (into out)
32N bytes for 4N FLOPs: arithmetic intensity 0.125 FLOP/B, two orders of magnitude left of the
ridge point, so the time is bytes / bandwidth. Expected on an H100: ~0.72 ms for N = 64 Mi
(2 GiB at ~3 TB/s; each 256 MiB intermediate is over 2x L2, so none stays in cache).

Work per call (minimum, both sides): read x, write out = 8N bytes = 512 MiB; 4N FLOPs (common.vector).
"""

import torch

from chapters.ch01.common import A, B, C, Example, vector


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    torch.mul(torch.relu(x * A + B), C, out=out)


def get_benchmark() -> Example:
    return Example(vector, launch)
