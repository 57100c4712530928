"""The same batch copied to the device as uint8, then normalised there.

The one idea: send the bytes, convert where the bandwidth is. The uint8 batch crosses the host link as it
is, 1 B per value (a quarter of the baseline's bytes), into a device buffer, and the same three fp32 ops
(common.normalize) run on the GPU, over HBM at ~3 TB/s instead of host memory; the host only launches them.
The same ops, each correctly rounded on either device: outputs equal bit for bit (the harness compares at
the default fp32 rtol; tests/chapters/test_ch05_storage.py checks the bits on the CPU).

Expected on the H100 host: 38.5 MB across PCIe at ~50 GB/s (setup records the measured rate as h2d_gbps):
~0.75 ms (1.5 ms at 25 GB/s); then the conversion, ~0.8 GB of HBM traffic (read 1 B and write 4 B per value,
then two in-place passes of 8 B) at ~3 TB/s: ~0.3 ms. ~1.0-1.1 ms per call, ~15-25x faster. Ceiling: the
uint8 copy alone at the link's rate; the conversion adds ~0.3 ms to it (~40 % at 50 GB/s), which only an
overlap of the two (the batch in pieces, chapter 10's double buffering: another idea) would hide. On a
CPU-only machine both sides run the same ops on the host, in the other order.

Work per call: as the baseline (common.Upload). Timed with the wall clock.
"""

import torch

from chapters.ch05.common import Upload, normalize, statistics


class OnDevice(Upload):
    made = (*Upload.made, "staging")

    def prepare(self, device: torch.device) -> None:
        self.stats = statistics(device)
        self.staging = torch.empty_like(self.images, device=device)

    def benchmark_fn(self) -> None:
        self.staging.copy_(self.images)
        normalize(self.staging, self.stats, self.out)


def get_benchmark() -> Upload:
    return OnDevice()
