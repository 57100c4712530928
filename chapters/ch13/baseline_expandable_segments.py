"""A loop of growing buffers on the caching allocator's default segments: what it reserves grows with the sum
of every size it was asked for.

48 steps, step i a [1024 + 509 i, 4096] fp32 activation (16 MiB growing to 392 MiB), the last two alive
(chapters/ch13/memory.py, ``Fragmentation``). Each step makes two buffers of its size (the scaled input, then its
GELU), and each request is larger than every block freed before it, so none can be reused: each becomes a new
cudaMalloc'd segment and the freed ones stay cached. The call starts from ``torch.cuda.empty_cache()``.

Predicted on an H100 or H200 (not measured): reserved peaks near twice the sum of the 48 sizes, ~20 GB, for at
most ~1.2 GB allocated at once plus the 392 MiB source. The pair's metric: ``peak_reserved``, per call. Clock: wall.
"""

from chapters.ch13.memory import Fragmentation


def get_benchmark() -> Fragmentation:
    return Fragmentation(expandable=False)
