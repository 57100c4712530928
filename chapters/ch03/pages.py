"""Chapter 3's ``huge_pages`` shell: a host table mapped on 4 KiB or 2 MiB pages, and what the kernel really gave.

Transparent huge pages are asked for (or refused) per mapping with ``madvise`` before the first touch, so each side
gets its page size whatever the host's default policy; the share huge pages really back is read from
``/proc/self/smaps`` after the fill and recorded with the policy.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import torch

from bench import context
from chapters.ch03.common import HostBenchmark, host_generator

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
HUGE_PAGE = 2 * 2**20  # x86-64's transparent huge page


def thp_mode() -> str:
    """The host's transparent-huge-page policy, the bracketed word of ``THP`` ("always", "madvise", "never"), or
    "absent" where the kernel has none."""
    try:
        text = THP.read_text()
    except OSError:
        return "absent"
    return text[text.index("[") + 1 : text.index("]")] if "[" in text else text.strip()


def huge_share(address: int, nbytes: int) -> float:
    """The share of the mapping at ``address`` backed by transparent huge pages (/proc/self/smaps' AnonHugePages)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        head = line.split(maxsplit=1)[0] if line else ""
        if "-" in head and int(head.split("-")[0], 16) == address:
            for entry in lines[i + 1 :]:
                if entry.startswith("AnonHugePages:"):
                    return int(entry.split()[1]) * 1024 / nbytes
    return 0.0


class Table(HostBenchmark):
    """huge_pages: a 1 GiB table in host memory (16 Mi rows of 16 int32: a 64-byte cache line each, an embedding
    table or a feature store kept on the host) and 2 Mi lookups per call at seeded random rows, gathered into
    ``out`` by ``index_select`` (the run's intra-op threads). The table is an anonymous mapping advised before its
    first touch: ``huge`` asks for transparent huge pages (``MADV_HUGEPAGE``: 2 MiB pages), otherwise they are
    refused (``MADV_NOHUGEPAGE``: 4 KiB pages, whatever the host's default), so each side gets its page size on
    any host. The share of the table that huge pages really back is measured after the fill and recorded
    (``huge_page_share``, from /proc/self/smaps), with the host's policy (``thp``).

    Work per call: each lookup reads its 64-byte row and writes it (plus its 8-byte index)."""

    made = ("map", "table", "idx", "out", "work")

    def __init__(self, huge: bool) -> None:
        self.huge = huge

    def setup(self) -> None:
        ctx = context()
        mode = ctx.record("thp", thp_mode())
        if self.huge and mode in ("never", "absent"):
            ctx.skip(f"transparent huge pages are {mode} on this host ({THP}); the pair compares 4 KiB and 2 MiB pages")
        rows, lookups = ctx.size((16 * 2**20, 2 * 2**20), (HUGE_PAGE * 3 // 64, 1001))
        # private: Python's default anonymous mapping is shared (shmem), which THP's ``enabled`` policy does not cover
        self.map = mmap.mmap(-1, rows * 64, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.map.madvise(mmap.MADV_HUGEPAGE if self.huge else mmap.MADV_NOHUGEPAGE)  # before the first touch
        self.table = torch.frombuffer(self.map, dtype=torch.int32).view(rows, 16)
        torch.arange(self.table.numel(), dtype=torch.int32, out=self.table.view(-1))  # every value its own index
        share = huge_share(self.table.data_ptr(), rows * 64)
        ctx.record("huge_page_share", round(share, 3))
        self.idx = torch.randint(rows, (ctx.record("lookups", lookups),), generator=host_generator())
        self.out = torch.empty(lookups, 16, dtype=torch.int32)
        self.work = {"bytes": lookups * (2 * 64 + 8)}

    def benchmark_fn(self) -> None:
        torch.index_select(self.table, 0, self.idx, out=self.out)

    def get_inputs(self) -> torch.Tensor:
        return self.idx

    def teardown(self) -> None:
        self.__dict__.pop("table", None)  # the tensor holds an export of the mapping's buffer
        if "map" in self.__dict__:
            self.map.close()
        super().teardown()
