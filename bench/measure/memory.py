"""Memory as a pair's verdict: a benchmark whose benefit is less memory, not less time, says so.

A benchmark declares what its pair is compared on with ``speedup_metric()`` (as a token-generating one names
TTFT or TPOT, bench.measure.generation). Besides ``"time"`` (the default), a benchmark that does not generate
tokens may name:

* ``"peak_memory"``: CUDA's ``max_memory_allocated`` over one call: the tensors the program holds at its
  fullest (activation checkpointing, offloading, freeing early);
* ``"peak_reserved"``: ``max_memory_reserved`` over one call: what the caching allocator took from the device,
  its fragmentation included (``expandable_segments``, allocation order), and what it kept cached from the calls
  before (resetting the peak statistics leaves the peak at what is reserved now): the program's steady-state
  footprint. A call that means to measure its own fragmentation starts from ``torch.cuda.empty_cache()``, on both
  sides.

The readings (``call_peaks``): after the check, a few more calls, each from reset peak statistics on a
synchronized device, each giving one peak less the harness's own L2-flush buffer. The pair's ratio is
baseline median / optimized median (> 1: the optimized side needs less), and its 95 % interval
(``memory_ratio``): exact when every reading of each side agrees, which is what a fixed program on CUDA's
caching allocator gives (the same requests in the same order get the same blocks); otherwise a bootstrap of
the ratio of medians over the readings. No run-to-run term is added: unlike a time, an allocator's peak does
not move with clocks or neighbours. On a CPU there is no reading to take (a process's peak RSS cannot be reset,
and torch's CPU allocator keeps no peak): the pair keeps its metric and gets no ratio.

A variant of several ranks (``world_size`` > 1, bench.isolate.ranks) has an allocator per rank, and the GPU that
runs out is the one with the most: each rank takes its own readings over the same calls, and the variant's are
the max over its ranks (``over_ranks``): the i-th call's peak is the largest of the ranks' i-th, and so for the
variant's peak, allocated and reserved memory. Every rank's own readings are kept, with the rank that held the
most, so a pair whose ranks are unbalanced (one holds more of a sharded model) says which.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from bench.errors import ProtocolError

MEMORY_METRICS = ("peak_memory", "peak_reserved")
# Readings per side: the peak of a fixed program repeats exactly; a handful shows when it does not.
CALLS = 5


def declared_metric(obj: Any) -> str:
    """A benchmark's ``speedup_metric()`` when it does not generate tokens: "time" (also without the method), one
    of MEMORY_METRICS or of bench.measure.quality's QUALITY_METRICS; a ProtocolError naming the bad value otherwise."""
    from bench.measure.quality import QUALITY_METRICS

    get = getattr(obj, "speedup_metric", None)
    metric = get() if callable(get) else "time"
    accepted = ("time", *MEMORY_METRICS, *QUALITY_METRICS)
    if metric not in accepted:
        raise ProtocolError(
            f"speedup_metric() returned {metric!r}; accepted for a benchmark that does not generate tokens: "
            f"{', '.join(repr(m) for m in accepted)}"
        )
    return str(metric)


def call_peaks(fn: Callable[[], Any], device: Any, metric: str, harness_bytes: int, calls: int = CALLS) -> list[float]:
    """``calls`` readings of ``metric`` (MiB), one per call of ``fn``, each from reset peak statistics on a
    synchronized device, less ``harness_bytes`` (the harness's L2-flush buffer, held through every call)."""
    import torch

    read = torch.cuda.max_memory_allocated if metric == "peak_memory" else torch.cuda.max_memory_reserved
    peaks = []
    for _ in range(calls):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        peaks.append((read(device) - harness_bytes) / 2**20)
    return peaks


def memory_ratio(baseline: Any, optimized: Any) -> tuple[float | None, float | None, float | None, str] | None:
    """(baseline / optimized peak, its 95 % interval, the metric) for a pair whose optimized side names a memory
    metric (None for any other pair); the ratio and interval are None where a side has no readings (a CPU)."""
    from bench.measure.stats import speedup_interval

    metric = optimized.memory.metric if optimized.memory is not None else None
    if metric not in MEMORY_METRICS:
        return None
    b = baseline.memory.call_peaks_mb if baseline.memory is not None and baseline.memory.metric == metric else []
    o = optimized.memory.call_peaks_mb
    if not b or not o or min(o) <= 0:
        return None, None, None, metric
    ratio = statistics.median(b) / statistics.median(o)
    if len(set(b)) == 1 and len(set(o)) == 1:  # every reading agrees: the ratio is exact
        return ratio, ratio, ratio, metric
    interval = speedup_interval(b, o, run_noise=0.0)
    return (ratio, *interval, metric) if interval is not None else (ratio, None, None, metric)


# The readings of one process that are a size, the variant's the max over its ranks.
_SIZES = ("peak_mb", "allocated_mb", "reserved_mb", "rss_peak_mb", "harness_mb")


def over_ranks(per_rank: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A variant's memory from every rank's (rank order; each a ``bench.define.result.Memory``'s fields as one
    rank read them from its own allocator): each size the max over the ranks (``_SIZES``), and of the call peaks
    the i-th the max of the ranks' i-th; every rank's ``peak_mb`` (``rank_peak_mb``) and call peaks
    (``rank_call_peaks_mb``) kept, with the rank that held the most (``peak_rank``; ``call_peak_rank``: the rank of
    the largest median, the first such rank on a tie). Device and metric are rank 0's."""
    if not per_rank:
        raise ValueError("over_ranks() needs at least one rank's memory, got none")
    merged = dict(per_rank[0])
    for key in _SIZES:
        values = [m[key] for m in per_rank if m.get(key) is not None]
        if values:
            merged[key] = max(values)
    peaks = [float(m["peak_mb"]) for m in per_rank]
    merged.update(rank_peak_mb=peaks, peak_rank=peaks.index(max(peaks)))
    calls = [list(m.get("call_peaks_mb") or []) for m in per_rank]
    if any(calls):
        if len({len(c) for c in calls}) != 1:  # the ranks call in lockstep: a count that differs is the harness's bug
            raise ValueError(f"the ranks took different numbers of call peaks: {[len(c) for c in calls]}")
        medians = [statistics.median(c) for c in calls]
        merged.update(call_peaks_mb=[max(reading) for reading in zip(*calls, strict=True)], rank_call_peaks_mb=calls,
                      call_peak_rank=medians.index(max(medians)))  # fmt: skip
    return merged
