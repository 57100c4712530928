"""Fake (GPU): the honest kernel launched on a side stream that is never joined back: the events on the
current stream, which time the call, see nothing of it.

Expected verdict: invalid, "work on an unjoined side stream" (the device is still busy after the end event
in most warm-up samples). On a CPU there are no streams: skipped, "needs a CUDA GPU".
"""

import torch

from bench import context
from chapters.ch20.fakes.ch91.common import Matmul


class SideStream(Matmul):
    def setup(self) -> None:
        context().require(cuda=True)
        super().setup()
        self.side = torch.cuda.Stream()

    def benchmark_fn(self) -> None:
        with torch.cuda.stream(self.side):
            self.honest()


def get_benchmark() -> SideStream:
    return SideStream()
