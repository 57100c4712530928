"""One pass over 512 JPEGs with a training step per batch of 64, fed by a DataLoader with its defaults.

``DataLoader(dataset, batch_size=64)``: no worker processes, so the main process decodes each JPEG (PIL),
crops, resizes, flips and normalizes it (common.JpegDataset: ~0.5-1 ms per 160² image), collates the batch
in pageable memory and copies it to the GPU with a blocking ``.to()``; only then does it launch the step.
The GPU waits for every batch, and the host waits for every copy. Conv net: ResNet-shaped, widths 64-256,
128² inputs, bf16 autocast (common.Loader).

What to look for in the profile: long ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` ranges on the
host row (inside them PIL's decode and the numpy normalisation, no torch ops), the GPU row empty meanwhile,
then a short burst of kernels for the step.

Predicted on an H100 host: 64 x ~0.7 ms ≈ 45 ms of decoding per batch against ~2 ms of GPU step: ~0.37 s
per call, bound by one core's decode rate. Work per call: 8 x 64 images (common.conv_flops). Clock: wall.
"""

from chapters.ch13.common import Loader


def get_benchmark() -> Loader:
    return Loader(fast=False)
