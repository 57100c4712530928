"""Random lookups in a 1 GiB host table on 4 KiB pages: nearly every lookup misses the TLB.

2 Mi lookups of 64-byte rows at random in a 1 GiB table (common.Table: an embedding table or a feature store
kept in host memory), gathered by ``index_select`` on the run's intra-op threads. The table is mapped with
huge pages refused (``MADV_NOHUGEPAGE``): 256 Ki pages of 4 KiB, against a second-level TLB of ~1.5-3 K
entries (~6-12 MiB of reach). Almost every lookup therefore pays a page walk before its own cache miss: four
levels of page table, the upper ones cached, the last (2 MiB of entries for 1 GiB) mostly not.

Expected on the H100 host: a page walk of the order of the DRAM miss itself on top of each lookup; the
optimized side ~1.3-2x faster.

Timed with the wall clock. Work per call (both sides): 2 Mi x (64 B read + 64 B written + an 8 B index).
"""

from chapters.ch03.pages import Table


def get_benchmark() -> Table:
    return Table(huge=False)
