"""A batch of uint8 images normalised on the host, then copied to the device as fp32.

The loader's habit (torchvision's ToTensor, then Normalize, before the batch leaves the host): the three fp32
ops of common.normalize, (x / 255 - mean) / std per channel, run on the host's intra-op threads over the
batch's 38.5 M values into a page-locked fp32 buffer, and that buffer is copied to the device: 4 B per value
cross the host link. The GPU waits for both.

Expected on the H100 host: the host pass moves ~1 GB through host memory (the uint8 read; three fp32 writes,
the first with its write-allocate reads; two fp32 reads) at ~40-80 GB/s on ~16 threads: ~12-25 ms (one thread
of the 2-core CI machine, shared and busy: 90-200 ms for the batch); then 154 MB across PCIe (Gen5 x16:
49-55 GB/s measured by chapters 10 and 11 on H100 hosts, 25-50 GB/s on lesser links; setup records this run's
rate as h2d_gbps): ~3 ms. ~15-28 ms per call.

Work per call (both sides): 38.5 M values, 1 B each across the host link and 4 B written on the device
(common.Upload); this side moves 4 B across instead. Timed with the wall clock.
"""

import torch

from chapters.ch05.common import Upload, normalize, statistics


class OnHost(Upload):
    made = (*Upload.made, "host")

    def prepare(self, device: torch.device) -> None:
        self.stats = statistics(torch.device("cpu"))
        self.host = torch.empty(self.images.shape, pin_memory=device.type == "cuda")

    def benchmark_fn(self) -> None:
        normalize(self.images, self.stats, self.host)
        self.out.copy_(self.host)


def get_benchmark() -> Upload:
    return OnHost()
