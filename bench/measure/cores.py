"""Threads against free cores: an intra-op-parallel op on a host whose cores are busy.

torch runs a CPU op on ``torch.get_num_threads()`` threads (one per core by default) and the op ends when its
last thread does. With a core kept busy by another process, the thread scheduled there waits for it a scheduler
slice at a time: on the busy 2-core host a 160x160 fp32 matmul read 16 ms per call where it takes 0.07 ms, and
5 of 12 A/A pairs read "slower". No verdict can be made of that. So before each round of a host-clocked pair
the parent reads how many cores are busy (``free_cores``: /proc/stat over a short window, its own CPU time not
counted) and the round's children run their measurement with at most that many intra-op threads
(``cap_threads``); both sides of a round get the same cap, and the result says what was done (a timing note and
``Timing.threads``). A benchmark that sets its own thread count in ``setup()`` keeps it.
"""

from __future__ import annotations

import math
import os
import time

WINDOW_S = 0.1  # /proc/stat ticks at 100 Hz: 10 ticks a core, enough to tell a busy core from a blip
BUSY_CORE = 0.5  # a core counts as busy once other processes use at least half of it
_LAST: list[tuple[int, int, float]] = []  # the latest reading


def free_cores(window_s: float = WINDOW_S, fresh: bool = True) -> tuple[int, int, float] | None:
    """(cores free for a measurement, at least 1; cores this process may run on; cores' worth of CPU time other
    processes used over ``window_s``), or None where /proc/stat cannot be read. ``fresh=False``: the latest
    reading where there is one (a child of the caller's runs now, and would count as another process's load)."""
    if not fresh and _LAST:
        return _LAST[-1]
    before, own0 = cpu_times(), process_cpu_s()
    time.sleep(window_s)
    after, own1 = cpu_times(), process_cpu_s()
    if before is None or after is None:
        return None
    share = host_busy_share(before, after, own1 - own0)
    if share is None:
        return None
    total = os.cpu_count() or 1
    usable = usable_cores()
    busy = share * total
    free = total - math.floor(busy + (1.0 - BUSY_CORE))
    _LAST[:] = [(max(1, min(usable, free)), usable, busy)]
    return _LAST[0]


def usable_cores() -> int:
    """The cores this process may run on: its affinity (a container's or a job scheduler's share), not the machine's
    count; the bound of what parallel workers can use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cap_note(limit: int, usable: int, busy: float) -> str:
    """The words a capped measurement carries."""
    return (
        f"intra-op threads capped at {limit}: other processes kept {busy:.1f} of the host's cores busy at the "
        f"round's start ({usable} usable); a thread waiting for a busy core waits a scheduler slice per call"
    )


def cap_threads(limit: int) -> bool:
    """At most ``limit`` intra-op threads from now on in this process (torch's own count if lower); whether it
    lowered the count."""
    import torch

    if limit >= torch.get_num_threads():
        return False
    torch.set_num_threads(max(1, limit))
    return True


def fit_threads() -> str | None:
    """This process's intra-op threads capped at the free cores now (the sweeps' CPU trials: each trial one
    process, no rounds); the note that says what was done, or None where nothing was capped."""
    seen = free_cores()
    if seen is None:
        return None
    free, usable, busy = seen
    return cap_note(free, usable, busy) if cap_threads(free) else None


def host_busy_share(before: tuple[float, float], after: tuple[float, float], own_cpu_s: float) -> float | None:
    """Share of the host's CPU time that other processes used between two ``cpu_times()`` readings
    (busy, total, in seconds over all cores), given this process's CPU seconds in between."""
    busy = after[0] - before[0]
    total = after[1] - before[1]
    if total <= 0:
        return None
    return max(0.0, busy - own_cpu_s) / total


def cpu_times() -> tuple[float, float] | None:
    """(busy, total) CPU seconds of the whole host since boot, from /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return (total - idle) / tick, total / tick


def process_cpu_s() -> float:
    """CPU seconds of this process, every thread (user + system), and of its descendants: those alive (a DataLoader's
    workers, a pool) and those it reaped. Their work is the variant's, not another process's load: counted as
    other processes', a data-loading pair on the H200 read "host busy: 93 %" with the host otherwise idle."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    try:
        import psutil
    except ImportError:
        return total
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return total
    for child in children:
        try:
            c = child.cpu_times()
        except psutil.Error:  # gone meanwhile: counted once reaped
            continue
        total += c.user + c.system
    return total
