"""Blocks of 1024 consecutive samples read from an HDF5 dataset stored in tall, narrow chunks.

The dataset (262 144 samples x 256 features, fp32) was written with chunks of 16 384 samples x 8
features (512 KiB each): good for reading a few features of every sample, wrong for reading all the
features of a few samples, which is what a training loop does. One 1 MiB read of 1024 samples touches
32 chunks; each fits HDF5's 1 MiB chunk cache, so HDF5 reads the whole 512 KiB chunk to use 32 KiB of it
(16x the bytes from the page cache), looks it up in the chunk index, and copies the selection out.

Page cache: warm (written in setup). Expected on the H100 host: per 1 MiB read ~16 MiB through the
chunk cache and 32 chunk lookups: ~3-5 ms, ~0.2-0.3 s per call of 64 reads; measured 279 ms on the 2-core
CI machine (h5py 3.16, plain loop), against 36 ms with matching chunks.

Work per call (both sides): 64 MiB read and delivered to the device (common.H5Rows). Timed with the
wall clock.
"""

from chapters.ch05.common import H5Rows


def get_benchmark() -> H5Rows:
    return H5Rows(tall=True)
