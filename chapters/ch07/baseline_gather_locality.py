"""Gather in random order: out[dst[i]] = x[src[i]] over the N (src, dst) pairs in a random order.

The pairs are (s[j], j) for s = N sorted draws from [0, N), so out[j] = x[s[j]]; this list holds
them shuffled. Consecutive lanes then read x at unrelated addresses, 256 MiB apart at most: each
4-byte read fetches its own 32-byte sector (8x the bytes used) from a different DRAM page, and
L2 (50 MB on an H100, a fifth of x) catches few of them. The store to out[dst] is just as
scattered: 32 B sectors written 4 B at a time, each partial sector merged in L2 and written back
whole (HBM has no byte masks, so possibly read first). The index reads stay coalesced.

Predicted (not measured): about 8 B of indices + 32 B of x + 32-64 B of out per pair, against
about 16 B in address order, so 4-7x slower than the sorted version on an H100, DRAM sector
rate-bound rather than byte-bound.
Measured on an H100 (2026-11-21): 6.86 ms, 19.97x slower than the sorted version (run 0b39ff5f).

Traffic (minimum): 8 B of indices per pair, 4 B per distinct x element read (about 0.63N), 4 B
written per pair; N = 64 Mi -> about 930 MiB per call.
"""

from chapters.ch07.common import Example, gather_launch, gather_pairs


def get_benchmark() -> Example:
    return Example(lambda: gather_pairs("random"), gather_launch)
