"""The clocks of a variant with world_size > 1 (bench.isolate.ranks): every rank calls ``benchmark_fn`` together,
and a sample is the slowest rank's time — a collective is over only when its last rank is.

Every rank runs the same code in lockstep, so every decision a clock takes from its samples (warm-up's steady
state, the stopping rule, the batch's size, the recheck's rounds) is taken from the same numbers on every rank:
after each sample the ranks' own times are gathered to all of them (kept rank by rank: ``rank_samples_ms``),
the sample is their maximum, and elapsed time is rank 0's clock, sent with it. A decision taken from one rank's
own numbers would let the ranks part ways and hang in their next collective. The harness talks over a gloo group
of its own (``set_control``): its traffic stays off the GPUs and out of the benchmark's communicator.

* ``RanksEventClock`` (GPU; ``timing_mode`` auto or cuda_event): each rank meets the others at a host barrier,
  flushes its L2 (a read of 2x its size, INTEGRITY #2), queues a spin kernel that holds its stream while the
  host enqueues the rest (the launch latency stays out, #1), then a one-element all-reduce on the default
  (NCCL) group: every GPU's stream leaves it at the same moment. The barrier alone leaves the hosts tens of µs
  apart, and a rank that starts early would count its wait for the late one inside the collective. Then CUDA
  events around one eager call (bench.measure.gpu_clocks.CudaEventClock, with these three hooks). NCCL runs a
  collective on a stream of its own and makes the caller's stream wait for it, so the end event covers it; work
  left running after the end event (an ``async_op`` never waited for) shows in the device-wide synchronize after
  it and is noted, as on one GPU. Batch: eager back-to-back calls between the same events.
* ``RanksHostClock`` (a CPU's gloo ranks, or ``timing_mode="cpu"`` on GPUs): barrier, then ``perf_counter``
  around one call (each GPU synchronized before and after).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable
from typing import Any

from bench.measure.clocks import (
    BATCH_RULE,
    EAGER_BATCH_TARGET_MS,
    MAX_EAGER_BATCH,
    STABLE_WINDOW,
    Batch,
    CpuClock,
    Fn,
    unsteady,
    warm_up,
)
from bench.measure.cores import process_cpu_s
from bench.measure.gpu_clocks import CudaEventClock
from bench.measure.guard import BOUND
from bench.measure.stopping import Measurement, StopRule, sample_until

_control: Any = None  # the harness's own gloo group among the ranks


def set_control(group: Any) -> None:
    """The gloo group the ranks' clocks meet and agree through (bench.isolate.ranks makes it at start-up)."""
    global _control
    _control = group


def control() -> Any:
    """The harness's gloo group among the ranks (None outside a variant's ranks)."""
    return _control


class _Ranks:
    """What both clocks of several ranks share: the barrier, the agreement on each sample, rank 0's clock."""

    world: int
    rank_samples_ms: list[list[float]] | None
    _now: float
    _last: list[float]
    # the clock's own (CudaEventClock's, CpuClock's)
    min_warmup_s: float
    max_warmup_s: float
    warmup_done: int
    stable: bool | None
    notes: list[str]
    eager_ms: float | None

    def _ranks(self, world: int) -> None:
        self.world = world
        self.rank_samples_ms = None  # of the measurement, rank by rank
        self._now = 0.0
        self._last = []

    def _barrier(self) -> None:
        BOUND.barrier(group=_control)

    def _agree(self, mine: float) -> float:
        """Every rank's ``mine`` (ms) gathered to all, and rank 0's clock with it; the slowest rank's."""
        import torch

        sent = torch.tensor([mine, BOUND.perf_counter()], dtype=torch.float64)
        parts = [torch.empty_like(sent) for _ in range(self.world)]
        BOUND.all_gather(parts, sent, group=_control)
        self._last = [float(p[0]) for p in parts]
        self._now = float(parts[0][1])
        return max(self._last)

    def _agreed_rule(self, rule: StopRule) -> StopRule:
        """``rule`` with every rank's time limits the largest rank's. The batch's rule is made from the rank's own
        wall time of its measurement (``batch_rule(cold_s)``): ranks that read it differently (a loaded host) would
        stop sampling at different samples, and the rank sampling on would hang in its next collective."""
        import torch

        t = torch.tensor([rule.min_seconds, rule.max_seconds], dtype=torch.float64)
        BOUND.all_reduce(t, op=torch.distributed.ReduceOp.MAX, group=_control)
        return dataclasses.replace(rule, min_seconds=float(t[0]), max_seconds=float(t[1]))

    def _start_clock(self) -> None:
        """Rank 0's ``perf_counter``, on every rank: the elapsed time a stopping rule reads (``now``)."""
        import torch

        t = torch.tensor([BOUND.perf_counter()], dtype=torch.float64)
        BOUND.broadcast(t, src=0, group=_control)
        self._now = float(t[0])

    def now(self) -> float:
        return self._now

    def _sampling(self, one: Callable[[], float], iterations: int | None, rule: StopRule) -> Measurement:
        """``sample_until`` on the ranks' agreed samples and clock; every rank's own time kept."""
        self._start_clock()
        self.rank_samples_ms = [[] for _ in range(self.world)]

        def sample() -> float:
            value = one()
            for rank, own in enumerate(self._last):
                self.rank_samples_ms[rank].append(own)  # type: ignore[index]
            return value

        return sample_until(sample, iterations, rule, now=self.now)

    def _warm(self, one: Callable[[], float], n: int) -> list[float]:
        """Warm-up to a steady state (bench.measure.clocks.warm_up) on the agreed samples and clock."""
        self._start_clock()
        samples, self.stable = warm_up(one, n, self.min_warmup_s, self.max_warmup_s, now=self.now)
        self.warmup_done = len(samples)
        self.eager_ms = statistics.median(samples[-STABLE_WINDOW:])
        if not self.stable:
            self.notes.append(unsteady(samples, self.max_warmup_s))
        return samples

    def cpu_s(self) -> float:
        """CPU seconds of every rank's process (bench.isolate.timed: the host's busy share leaves them out)."""
        import torch

        t = torch.tensor([process_cpu_s()], dtype=torch.float64)
        BOUND.all_reduce(t, group=_control)
        return float(t[0])

    def _eager_batch(self, span: Callable[[Fn], float], fn: Fn, per_call_ms: float, rule: StopRule) -> Batch:
        calls = min(MAX_EAGER_BATCH, max(2, math.ceil(EAGER_BATCH_TARGET_MS / max(per_call_ms, 1e-4))))
        rule = self._agreed_rule(rule)

        def work() -> None:
            for _ in range(calls):
                fn()

        self._start_clock()
        m = sample_until(lambda: span(work) / calls, None, rule, now=self.now)
        return Batch(m.samples_ms, calls, "", m.stop_reason, m.noise)


class RanksEventClock(_Ranks, CudaEventClock):
    """CUDA events on every rank, their streams released together; the slowest rank's span."""

    def __init__(self, device: Any, world: int, flush_l2: bool, spin_ms: float, sample_gap: float,
                 min_warmup_s: float, max_warmup_s: float) -> None:  # fmt: skip
        import torch

        CudaEventClock.__init__(self, device, flush_l2, spin_ms, sample_gap, min_warmup_s, max_warmup_s)
        self._ranks(world)
        self.differential = False  # eager calls: no CUDA graph of NCCL work is assumed
        self._meet = torch.zeros(1, device=device)

    @property
    def method(self) -> str:
        gap = f"; GPU idle {self.sample_gap:g}x the sample's span after each sample" if self.sample_gap else ""
        flush = "L2 flushed (2x L2 read)" if self.l2_flushed else "warm L2 (no flush)"
        return (
            f"{self.world} ranks, each sample the slowest rank's: host barrier, {flush}, a spin kernel to hide "
            "launch latency, a one-element all-reduce that releases every GPU's stream together, then CUDA "
            f"events around one call on each rank{gap}"
        )

    def _before_sample(self) -> None:
        self._barrier()

    def _align(self) -> None:
        BOUND.all_reduce(self._meet)  # the default group: NCCL, on the stream behind the spin kernel

    def _agreed(self, span: float) -> float:
        return self._agree(span)

    def first_call(self, fn: Fn) -> float:
        self._barrier()
        return self._agree(CudaEventClock.first_call(self, fn))

    def warmup(self, fn: Fn, n: int) -> None:
        self._judge(len(self._warm(lambda: self.eager(fn), n)), "warm-up ")

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        m = self._sampling(lambda: self.one(fn), iterations, rule)
        self._judge(len(m.samples_ms), "")
        return m

    def measure_batch(self, fn: Fn, per_call_ms: float, rule: StopRule = BATCH_RULE) -> Batch | None:
        self._span(fn, flush=False)  # grows the spin to cover enqueueing a call
        self._reset_counts()
        batch = self._eager_batch(lambda work: self._span(work, flush=False), fn, per_call_ms, rule)
        self._judge(len(batch.samples_ms), "batch ")
        batch.method = (
            f"{batch.calls} eager back-to-back calls / {batch.calls} on every rank, the slowest rank's; warm L2"
        )
        return batch


class RanksHostClock(_Ranks, CpuClock):
    """``perf_counter`` on every rank after a host barrier (GPUs synchronized around the call); the slowest rank's."""

    def __init__(self, world: int, sync: Callable[[], None] | None, min_warmup_s: float, max_warmup_s: float) -> None:
        CpuClock.__init__(self, sync, min_warmup_s, max_warmup_s)
        self._ranks(world)

    @property
    def method(self) -> str:
        gpu = ", each GPU synchronized before start and stop" if self.sync else ""
        return (
            f"{self.world} ranks, each sample the slowest rank's: host barrier, then time.perf_counter around one "
            f"call{gpu}"
        )

    def _span(self, work: Fn) -> float:
        if self.sync:
            self.sync()
        self._barrier()
        t0 = BOUND.perf_counter()
        work()
        if self.sync:
            self.sync()
        return (BOUND.perf_counter() - t0) * 1e3

    def one(self, fn: Fn) -> float:
        return self._agree(self._span(fn))

    def first_call(self, fn: Fn) -> float:
        return self.one(fn)

    def warmup(self, fn: Fn, n: int) -> None:
        self._warm(lambda: self.one(fn), n)

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        return self._sampling(lambda: self.one(fn), iterations, rule)

    def measure_batch(self, fn: Fn, per_call_ms: float, rule: StopRule = BATCH_RULE) -> Batch | None:
        batch = self._eager_batch(lambda work: self._agree(self._span(work)), fn, per_call_ms, rule)
        batch.method = (
            f"perf_counter around {batch.calls} back-to-back calls / {batch.calls} on every rank, the slowest rank's"
        )
        return batch


def ranks_clock(mode: str, device: Any, world: int, flush_l2: bool, spin_ms: float, sample_gap: float,
                host_min_s: float, gpu_min_s: float, max_warmup_s: float) -> CudaEventClock | CpuClock:  # fmt: skip
    """The clock of ``world`` ranks on ``device`` (this rank's) for timing ``mode`` (bench.measure.timer.make_clock's
    settings): events on GPUs (auto, cuda_event; cuda_graph, triton and pytorch fall back to events, with the
    reason), the host's clock on a CPU or for ``cpu``."""
    is_cuda = getattr(device, "type", str(device)) == "cuda"
    if not is_cuda or mode == "cpu":
        sync = (lambda: BOUND.synchronize(device)) if is_cuda else None
        host = RanksHostClock(world, sync, host_min_s, max_warmup_s)
        if mode not in ("auto", "cpu"):
            host.fallback = f"timing_mode={mode!r} needs a CUDA device; device is {device!s}, timed with 'cpu'"
        return host
    clock = RanksEventClock(device, world, flush_l2, spin_ms, sample_gap, gpu_min_s, max_warmup_s)
    if mode not in ("auto", "cuda_event"):
        clock.fallback = f"timing_mode={mode!r} cannot time {world} ranks together; timed with 'cuda_event' on each"
    return clock
