"""Gather in address order: the same kernel and the same (src, dst) pairs, listed sorted by src.

The only change is the order of the work list: sorted by the address each pair reads, lane i of
a warp reads x[s[i]] with s nondecreasing and about one element apart on average, so a warp's 32
reads fall in 4-5 neighbouring sectors and every sector of x is fetched from DRAM once (repeated
indices hit in L1/L2), in page order. Here dst = j in sorted order too, so the stores are
coalesced (no 16-byte vector stores: the kernel cannot know dst is contiguous). Same pairs, so
the same tensor out, bit for bit.

The sort is not in the timed call: the order is chosen once and pays off when the index list is
reused (a fixed sparse structure, tokens grouped per expert, sorted embedding lookups); sorting
N keys per call would cost several passes over them.

Predicted (not measured): about 16 B moved per pair (8 B indices, 4 B x, 4 B out), near copy
bandwidth: 4-7x faster than the random order on an H100.
Measured on an H100 (2026-11-21): 343 µs, 2840 GB/s of declared bytes, 19.97x faster (run 0b39ff5f).

Traffic (minimum): 8 B of indices per pair, 4 B per distinct x element read (about 0.63N), 4 B
written per pair; N = 64 Mi -> about 930 MiB per call.
"""

from chapters.ch07.common import Example, gather_launch, gather_pairs


def get_benchmark() -> Example:
    return Example(lambda: gather_pairs("sorted"), gather_launch)
