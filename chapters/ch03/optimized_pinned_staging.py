"""The same batches gathered straight into two page-locked staging buffers, copied without waiting.

The one idea: assemble each batch where the DMA engine can read it. torch.index_select writes the
gathered rows into a page-locked buffer allocated once (no fresh pages, no driver staging copy), and the
copy to the device is queued (non_blocking) so the host gathers the next batch into the other buffer
while the DMA moves this one; a CUDA event per buffer keeps the host from overwriting a buffer whose copy
has not finished. Per batch: one gather, and the DMA behind it.

Expected on the H100 host: ~1.5 ms per batch (the gather; the 16 MiB DMA, ~0.3 ms at ~50 GB/s, hides
behind it), ~2x faster. On a CPU-only machine there is no page-locked memory and no DMA: the buffers are
ordinary reused host memory and the copy is a memcpy, so what remains is the gather into a reused
buffer instead of a fresh one.

Work per call: as the baseline (common.Gather). Timed with the wall clock.
"""

import torch

from chapters.ch03.common import Gather


class Staged(Gather):
    def prepare(self, batch: int, width: int) -> None:
        cuda = self.out.is_cuda
        self.slots = [torch.empty(batch, width, pin_memory=cuda) for _ in range(2)]
        self.events = [torch.cuda.Event() for _ in range(2)] if cuda else None

    def deliver(self, step: int) -> None:
        k = step % 2
        if self.events is not None:
            self.events[k].synchronize()  # this buffer's previous copy has left it
        torch.index_select(self.data, 0, self.idx[step], out=self.slots[k])
        self.out[step].copy_(self.slots[k], non_blocking=self.events is not None)
        if self.events is not None:
            self.events[k].record()


def get_benchmark() -> Gather:
    return Staged()
