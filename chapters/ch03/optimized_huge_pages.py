"""The same lookups with the table on 2 MiB transparent huge pages: the TLB covers far more of it.

The one idea: bigger pages. Advised with ``MADV_HUGEPAGE`` before its first touch, the table is backed by
2 MiB pages where the kernel finds them (``size.huge_page_share`` records how much it got): 512 pages for
1 GiB, within what the second-level TLB holds of 2 MiB entries on recent x86 cores, and a page walk one level
shorter whose entries (4 KiB for the whole table) stay in cache. The lookups' own cache misses remain: the
gain is the page walk, not the DRAM latency.

Expected on the H100 host: ~1.3-2x. The baseline refuses huge pages itself, so the pair compares the two page
sizes whatever the host's default ("always" or "madvise"); where the policy is "never" this side is skipped,
the reason naming it.

Timed and counted as the baseline. Outputs: the same rows, compared exactly.
"""

from chapters.ch03.pages import Table


def get_benchmark() -> Table:
    return Table(huge=True)
