"""Copy with one fp32 per thread: out = x with programs of 128 elements on 4 warps.

Each thread issues one 4-byte load and one 4-byte store, then its program ends. Accesses are
coalesced, so no byte is wasted; what is short is bytes in flight: to keep HBM busy a GPU needs
roughly latency x bandwidth (~2 MB on an H100) of loads outstanding, and at 4 B per thread the
SMs run out of resident threads, plus 512 Ki tiny programs to schedule. Expected: well below
copy bandwidth (measured on an H100: 1.76x slower than the optimized version, 1.68 TB/s).

Traffic (minimum): read 4N + write 4N bytes, N = 64 Mi fp32 -> 512 MiB per call.
"""

from chapters.ch07.common import Example, copy_blocks, elementwise, vector


def get_benchmark() -> Example:
    return Example(vector, elementwise(copy_blocks, block=128, num_warps=4))
