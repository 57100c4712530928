"""16 batches per call gathered from a host dataset into fresh pageable tensors, then copied to the device.

`data[idx]` allocates a new pageable tensor for every batch (16 MiB: fresh pages the kernel must fault in
and zero, unless the allocator happens to recycle them), and `.copy_` from pageable memory makes the
driver copy it again, piece by piece, into its own page-locked buffer before the DMA engine moves it,
with the host waiting for the whole transfer. Per batch: a gather, a staging memcpy and the DMA, in turn.

Expected on the H100 host: ~3 ms per batch (gather ~1.5, pageable copy ~1.5 at ~10-15 GB/s), ~50 ms
per call. On a CPU-only machine the device is host memory: a fresh allocation plus a copy per batch.

Work per call (both sides): 16 x 4096 rows of 4 KiB gathered and delivered, 256 MiB read and written
(common.Gather). Timed with the wall clock.
"""

from chapters.ch03.common import Gather


class Pageable(Gather):
    def deliver(self, step: int) -> None:
        self.out[step].copy_(self.data[self.idx[step]])


def get_benchmark() -> Gather:
    return Pageable()
