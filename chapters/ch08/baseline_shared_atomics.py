"""A 256-bin byte histogram in CUDA C++, every byte one atomic add in global memory.

``byte_histogram_global`` (cuda_kernels.BYTE_HISTOGRAM): a full-occupancy grid reads 256 Mi bytes 16 at a time and
adds each byte to its bin in the global histogram. The 256 counters live in a few L2 lines that every SM's adds
reach; L2 applies adds to one address one after another, so the kernel runs at the L2 atomic units' rate for a
handful of addresses, not at the rate the bytes arrive from DRAM.

Expected (predicted, not yet run on a GPU): tens of times slower than reading the bytes.

Work (both sides): 256 Mi bytes read once, 256 counts written (cuda_kernels.pixels); the counts are zeroed inside
each call on both sides. Roofline: memory (one byte an element).
"""

from chapters.ch08.cuda_kernels import byte_histogram


def get_benchmark():
    return byte_histogram("byte_histogram_global")
