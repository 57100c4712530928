"""The same file read by cuFile (GPUDirect Storage) straight into the device buffer.

The one idea: take host memory out of the path. With GDS (the nvidia-fs driver and a supported filesystem) the
drive's DMA engine writes into GPU memory through the PCIe BAR: one transfer instead of two, no host buffer, no
CPU copy, and the host's memory bandwidth left to other work; the call is bounded by the drive alone (the stated
ceiling: one preadv's rate, timed in setup; target 80 %). The buffer is registered with cuFile once, in setup.

Where GDS cannot run, cuFile's compatibility mode does the baseline's work itself (POSIX reads into its own
bounce buffers, copies to the device, in chunks and on its own threads): then any difference is its pipelining
of reads and copies, not GPUDirect, and `size.cufile_mode` (cuFile's own report) says so.

Expected on the H200 host: GDS, on a local NVMe: at the drive's rate, ~5-10 % faster than the baseline on one
drive (the copy it removes is short next to the read); compatibility mode: about the baseline's time.

Timed and counted as the baseline. Needs a GPU and libcufile (skipped with the reason otherwise).
"""

from chapters.ch05.cufile_io import FileToDevice


def get_benchmark() -> FileToDevice:
    return FileToDevice(cufile=True)
