"""A file read into GPU memory the usual way: into a page-locked host buffer, then one copy to the device.

256 MiB (a shard of a dataset or a checkpoint) read by ``preadv`` from a file opened with O_DIRECT
(cufile_io.FileToDevice): the drive's DMA writes the host buffer, then a second DMA carries it over PCIe to
the GPU. Host memory is written and read once each, and the two transfers run one after the other.

Expected on the H200 host: the drive's read (a few GB/s for one NVMe; `size.read_gbps` records it) plus
256 MiB at ~55 GB/s (~5 ms): within ~10 % of the read alone on one drive, more on a striped array whose
reads approach the link's rate.

Timed with the wall clock. Work per call (both sides): the file's 256 MiB delivered to the device.
Runs on a CPU too (an anonymous mapping for the buffer, no copy), where the cuFile side skips.
"""

from chapters.ch05.cufile_io import FileToDevice


def get_benchmark() -> FileToDevice:
    return FileToDevice(cufile=False)
