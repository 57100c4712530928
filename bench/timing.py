"""Clocks: how calls of ``benchmark_fn`` become raw samples. Examples never time themselves.

Two measurement kinds, as nvbench names them, both kept:

* **cold** (the primary ``time_*`` metrics): one call per sample with L2 flushed (a read of twice the
  device's L2, INTEGRITY #2), queued behind a spin kernel so the host's launch latency (10-20 µs on an
  H100, INTEGRITY #1) stays out. Where the call can be captured in a CUDA graph, each sample is a
  difference: CUDA events around one replay of a graph [flush, call] minus one of a graph [flush] alone,
  so the events' own cost and the device's start of a kernel after an event (~2.5 µs: a 1 µs add read
  3.5 µs per call, an 8 MiB op 9.5 µs against Nsight Compute's 6.8) cancel, and the call's kernels run
  as they would after a flush, on a cold L2. Otherwise events around one eager call, noted.
* **batch** (``batch_time_*``): back-to-back calls captured in one CUDA graph (~4 ms of them) and
  replayed, the replay timed with events and divided by its calls: what a call costs in a stream of
  calls, with warm L2 (INTEGRITY #14). Eager back-to-back calls when capture is impossible, noted.

A pair's speedup uses cold unless its config asks for batch (``speedup_time``), and says which.

Every clock has one surface: ``first_call(fn)``, ``warmup(fn, n)``, ``measure(fn, iterations, rule)``,
``measure_batch(fn, per_call_ms, rule)``. Clocks call only the functions ``bench.guard.BOUND`` captured
before any benchmark code ran; a benchmark that replaces a timer is caught by ``bench.guard.tampered``.

Warm-up (INTEGRITY #8, #15): at least the configured count and ``min_warmup_s``, then on until the
median of the last ``STABLE_WINDOW`` samples is within ``STABLE_TOLERANCE`` of the window's before (a
steady state), at most ``max_warmup_s``. Sampling stops on a noise target (bench.stopping).

Modes: ``cpu`` (``perf_counter`` around each call; on a GPU variant the device is synchronized before
the clock starts and before it stops, so all streams' work and the host's launch cost are counted);
``cuda_event`` (default on GPU: the cold protocol above; warm-up samples are eager calls between
events, and work still running on another stream after their end event makes the variant invalid,
INTEGRITY #3); ``cuda_graph`` (each cold sample one replay of a graph of one call: launch overhead
between a call's kernels disappears; falls back to ``cuda_event``
with the reason); ``triton`` (``triton.testing.do_bench``); ``pytorch`` (``torch.utils.benchmark``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from bench.guard import BOUND
from bench.stopping import Measurement, StopRule, relative_noise, sample_until

if TYPE_CHECKING:
    from bench.config import BenchmarkConfig

Fn = Callable[[], Any]

MODES = ("auto", "cpu", "cuda_event", "cuda_graph", "triton", "pytorch")
_MAX_SPIN_MS = 50.0
# Batch sizes: a graph launch costs the device ~20 µs before its first kernel (H100: a 52-call graph of a
# 1.0 µs add read 1.42 µs per call, 1000 calls 1.02 µs), so graph batches span ~4 ms of calls.
GRAPH_BATCH_TARGET_MS = 4.0
MAX_GRAPH_BATCH = 4000
EAGER_BATCH_TARGET_MS = 1.0
MAX_EAGER_BATCH = 1000
# Warm-up to a steady state: the last window's median within this of the window before.
STABLE_WINDOW = 5
STABLE_TOLERANCE = 0.10
# A device-wide sync still waiting this long after the end event, in at least this share of the samples, is
# noted (1-7 of ~240 samples on an H100 host are host jitter).
_SIDE_STREAM_MIN_MS = 0.05
_SIDE_STREAM_FRACTION = 0.1
SIDE_STREAM_NOTE_SHARE = 0.2
# Cold samples of a captured call subtract the median span of this many recent [flush] replays.
FLUSH_WINDOW = 9
# The batch measurement's effort: enough samples for its median, a fraction of the cold one's time.
BATCH_RULE = StopRule(min_samples=10, min_seconds=0.02, max_seconds=0.3)


@dataclass
class Batch:
    """Back-to-back calls, per-call times (``samples_ms``: each sample one batch / its calls)."""

    samples_ms: list[float]
    calls: int
    method: str
    stop_reason: str
    noise: float | None = None
    notes: list[str] = field(default_factory=list)


class Clock(Protocol):
    mode: str  # the mode actually used
    l2_flushed: bool
    notes: list[str]
    fallback: str | None  # why the requested mode could not be used
    invalid: str | None  # why the samples cannot be trusted at all (side streams)
    warmup_done: int
    stable: bool | None

    @property
    def method(self) -> str: ...

    def first_call(self, fn: Fn) -> float: ...

    def warmup(self, fn: Fn, n: int) -> None: ...

    def one(self, fn: Fn) -> float: ...

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement: ...

    def measure_batch(self, fn: Fn, per_call_ms: float, rule: StopRule = BATCH_RULE) -> Batch | None: ...


def warm_up(one: Callable[[], float], n: int, min_s: float, max_s: float) -> tuple[list[float], bool]:
    """Samples of ``one()`` (ms): at least ``n`` and ``min_s`` seconds of them, then until the median of the
    last ``STABLE_WINDOW`` is within ``STABLE_TOLERANCE`` of the window's before, or ``max_s`` has passed
    (then ``False``: no steady state). A count alone let a fresh process's slow first calls become the
    sample (INTEGRITY #15)."""
    now = BOUND.perf_counter
    t0 = now()
    samples: list[float] = []
    while True:
        samples.append(one())
        elapsed = now() - t0
        if len(samples) >= n and elapsed >= min_s and _stable(samples):
            return samples, True
        if len(samples) >= n and elapsed >= max_s:
            return samples, False


def _stable(samples: list[float]) -> bool:
    if len(samples) < 2 * STABLE_WINDOW:
        return False
    last = statistics.median(samples[-STABLE_WINDOW:])
    before = statistics.median(samples[-2 * STABLE_WINDOW : -STABLE_WINDOW])
    return abs(last - before) <= STABLE_TOLERANCE * max(before, 1e-9)


def drift_note(samples_ms: list[float]) -> str | None:
    """A note when the first third of the samples and the last third differ beyond their noise (and by
    more than 2 %): the machine or the code was not in a steady state while it was measured."""
    n = len(samples_ms)
    if n < 9:
        return None
    k = n // 3
    early, late = samples_ms[:k], samples_ms[-k:]
    m_early, m_late = statistics.median(early), statistics.median(late)
    noise = max(relative_noise(early), relative_noise(late))
    if not math.isfinite(noise) or m_early <= 0:
        return None
    change = m_late / m_early - 1.0
    if abs(change) > max(0.02, 3.0 * math.sqrt(2.0) * noise):
        return (
            f"drift: the first {k} samples' median {1e3 * m_early:.2f} µs, the last {k}' {1e3 * m_late:.2f} µs "
            f"({100 * change:+.1f} %, beyond their noise): not a steady state"
        )
    return None


@dataclass
class CpuClock:
    """``perf_counter`` around each call; synchronizes the GPU first when the variant runs on one."""

    sync: Callable[[], None] | None = None
    min_warmup_s: float = 0.3
    max_warmup_s: float = 5.0
    warmup_done: int = 0
    stable: bool | None = None
    mode: str = "cpu"
    l2_flushed: bool = False
    notes: list[str] = field(default_factory=list)
    fallback: str | None = None
    invalid: str | None = None

    @property
    def method(self) -> str:
        extra = ", device synchronized before start and stop" if self.sync else ""
        return f"time.perf_counter around each call{extra}"

    def one(self, fn: Fn) -> float:
        if self.sync:
            self.sync()
        t0 = BOUND.perf_counter()
        fn()
        if self.sync:
            self.sync()
        return (BOUND.perf_counter() - t0) * 1e3

    def first_call(self, fn: Fn) -> float:
        return self.one(fn)

    def warmup(self, fn: Fn, n: int) -> None:
        samples, self.stable = warm_up(lambda: self.one(fn), n, self.min_warmup_s, self.max_warmup_s)
        self.warmup_done = len(samples)
        if not self.stable:
            self.notes.append(_unsteady(samples, self.max_warmup_s))

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        return sample_until(lambda: self.one(fn), iterations, rule)

    def measure_batch(self, fn: Fn, per_call_ms: float, rule: StopRule = BATCH_RULE) -> Batch | None:
        calls = min(MAX_EAGER_BATCH, max(2, math.ceil(EAGER_BATCH_TARGET_MS / max(per_call_ms, 1e-4))))

        def one() -> float:
            if self.sync:
                self.sync()
            t0 = BOUND.perf_counter()
            for _ in range(calls):
                fn()
            if self.sync:
                self.sync()
            return (BOUND.perf_counter() - t0) * 1e3 / calls

        m = sample_until(one, None, rule)
        how = f"perf_counter around {calls} back-to-back calls / {calls}"
        how += ", device synchronized" if self.sync else ""
        return Batch(m.samples_ms, calls, how, m.stop_reason, m.noise)


def _unsteady(samples: list[float], max_s: float) -> str:
    tail = ", ".join(f"{1e3 * s:.2f}" for s in samples[-2 * STABLE_WINDOW :])
    return (
        f"warm-up: no steady state after {len(samples)} calls and {max_s:g} s (the last calls, µs: {tail}); "
        "the machine may be busy"
    )


class L2Flush:
    """Reads a buffer of twice the device's L2 size (INTEGRITY #2): no line of earlier work survives.

    A read, not a write: L2 ends up full of clean lines, so the timed work's evictions cost nothing.
    A write-based flush (``zero_``) leaves 2x L2 of dirty lines whose write-back lands inside the next
    sample (+7 µs on a 128 MiB op on an H100, measured by perflab selfcheck). The read is an fp32 sum
    into a preallocated scalar: no temporary.
    """

    def __init__(self, device: Any) -> None:
        import torch

        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
        self._torch = torch
        self._buf = torch.ones(2 * l2 // 4, dtype=torch.float32, device=device)
        self._sink = torch.empty((), dtype=torch.float32, device=device)
        self.bytes = self._buf.numel() * 4 + 4

    def __call__(self) -> None:
        self._torch.sum(self._buf, dim=0, out=self._sink)


def capture_graph(fn: Fn, calls: int, device: Any) -> Fn:
    """``calls`` back-to-back calls of ``fn`` captured in one CUDA graph; its ``replay``. Raises if impossible.

    ``fn`` runs once on a side stream first (allocator warm-up, as torch's CUDA-graph docs require).
    Only device work is captured: Python side effects of ``fn`` happen at capture, not at replay.
    """
    import torch

    BOUND.bind_torch()  # a caller outside a timed child (the selfcheck's truths) has not bound them yet
    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(BOUND.current_stream(device))
        with torch.cuda.stream(side):
            fn()
        BOUND.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        graph.replay()
        BOUND.synchronize(device)
    except Exception:
        BOUND.synchronize(device)
        raise
    return graph.replay


class CudaEventClock:
    """CUDA events, L2 flushed and launch latency hidden behind a spin kernel (cold); graph batches (batch)."""

    mode = "cuda_event"

    def __init__(
        self,
        device: Any,
        flush_l2: bool = True,
        spin_ms: float = 0.05,
        sample_gap: float = 1.0,
        min_warmup_s: float = 0.05,
        max_warmup_s: float = 5.0,
    ) -> None:
        BOUND.bind_torch()
        self.device = device
        self.l2_flushed = flush_l2
        self.notes: list[str] = []
        self.fallback: str | None = None
        self.invalid: str | None = None
        self.leaks = 0
        self.side_stream = 0
        self.tails_ms: list[float] = []  # per sample: the device-wide sync's wait after the end event,
        self.idle_sync_ms: list[float] = []  # and a second sync's, with nothing left to wait for
        self._flush = L2Flush(device) if flush_l2 else None
        self.overhead_bytes = self._flush.bytes if self._flush is not None else 0
        self._cycles_per_ms = self._calibrate()
        self._spin_ms = spin_ms  # grows (doubling) whenever a sample shows the host outran it
        self.sample_gap = sample_gap  # idle after each sample, as a multiple of its span
        self.min_warmup_s, self.max_warmup_s = min_warmup_s, max_warmup_s
        self.warmup_done = 0
        self.stable: bool | None = None
        self.differential = flush_l2  # cold samples as graph differences, when the call can be captured
        self._with_call: Fn | None = None  # replay of a graph [flush, call]
        self._flush_only: Fn | None = None  # replay of a graph [flush]
        self._flush_spans: list[float] = []  # its spans so far
        self.eager_ms: float | None = None  # median eager cold call at the end of warm-up

    @property
    def method(self) -> str:
        gap = f"; GPU idle {self.sample_gap:g}x the sample's span after each sample" if self.sample_gap else ""
        if self._with_call is not None:
            return (
                "CUDA events around one CUDA-graph replay of [L2 flush, call] minus the median of the last "
                f"{FLUSH_WINDOW} replays of [L2 flush], each queued "
                f"behind a spin kernel and after an untimed L2 flush; cold L2{gap}"
            )
        flush = "L2 flushed (2x L2 read) before each call" if self.l2_flushed else "warm L2 (no flush)"
        return f"CUDA events per call, start queued behind a spin kernel to hide launch latency; {flush}{gap}"

    def _calibrate(self) -> float:
        start, end = BOUND.Event(enable_timing=True), BOUND.Event(enable_timing=True)
        cycles = 1_000_000
        BOUND.spin(cycles)  # the first launch loads the kernel
        BOUND.synchronize(self.device)
        BOUND.record(start)
        BOUND.spin(cycles)
        BOUND.record(end)
        BOUND.event_synchronize(end)
        return cycles / max(BOUND.elapsed_time(start, end), 1e-3)

    def _span(self, work: Fn, flush: bool) -> float:
        """Milliseconds between events around ``work`` queued behind the spin kernel; counts leaks (the
        host outran the spin) and side streams (the device still busy after the end event)."""
        start, end = BOUND.Event(enable_timing=True), BOUND.Event(enable_timing=True)
        if flush and self._flush is not None:
            self._flush()
        BOUND.spin(int(self._spin_ms * self._cycles_per_ms))
        BOUND.record(start)
        work()
        leaked = BOUND.query(start)  # the GPU reached the start before the host finished enqueueing
        BOUND.record(end)
        BOUND.event_synchronize(end)
        t0 = BOUND.perf_counter()
        BOUND.synchronize(self.device)  # device-wide: waits for other streams too
        t1 = BOUND.perf_counter()
        BOUND.synchronize(self.device)  # nothing left: what a synchronize costs this host right now
        t2 = BOUND.perf_counter()
        # Work on another stream is what the first sync waited beyond the cost of a sync itself (a host
        # whose synchronize alone took > 50 µs flagged a plain 43 µs kernel in 40 % of samples, H100).
        self.tails_ms.append((t1 - t0) * 1e3)
        self.idle_sync_ms.append((t2 - t1) * 1e3)
        tail_ms = ((t1 - t0) - (t2 - t1)) * 1e3
        span = float(BOUND.elapsed_time(start, end))
        if tail_ms > max(_SIDE_STREAM_MIN_MS, _SIDE_STREAM_FRACTION * span):
            self.side_stream += 1
        if leaked:
            self.leaks += 1
            self._spin_ms = min(self._spin_ms * 2, _MAX_SPIN_MS)
        if self.sample_gap > 0:
            BOUND.sleep(self.sample_gap * span / 1e3)
        return span

    def one(self, fn: Fn) -> float:
        if self._with_call is not None and self._flush_only is not None:
            # The flush's own span varies by about a microsecond between replays; subtracting the median of the
            # recent ones, not the one beside, keeps that out of each sample (a 2 µs call read <= 0 otherwise).
            with_call = self._span(self._with_call, flush=True)
            self._flush_spans.append(self._span(self._flush_only, flush=True))
            return with_call - statistics.median(self._flush_spans[-FLUSH_WINDOW:])
        return self._span(fn, flush=True)

    def eager(self, fn: Fn) -> float:
        """One eager cold call between events (what warm-up samples are; a restored state's call)."""
        return self._span(fn, flush=True)

    def first_call(self, fn: Fn) -> float:
        BOUND.synchronize(self.device)
        t0 = BOUND.perf_counter()
        fn()
        BOUND.synchronize(self.device)
        return (BOUND.perf_counter() - t0) * 1e3

    def warmup(self, fn: Fn, n: int) -> None:
        # Eager cold samples: they grow the spin to cover the host's enqueue, and note the streams the call
        # makes current (a graph captures no work launched on a stream outside the capture: only eager calls
        # show it).
        with BOUND.streams_made_current() as seen:
            samples, self.stable = warm_up(lambda: self.eager(fn), n, self.min_warmup_s, self.max_warmup_s)
        self.warmup_done = len(samples)
        self.eager_ms = statistics.median(samples[-STABLE_WINDOW:])
        if not self.stable:
            self.notes.append(_unsteady(samples, self.max_warmup_s))
        self._judge(len(samples), "warm-up ")
        self._check_side_streams(fn, seen)
        if self.differential and self.invalid is None:
            self._capture_cold(fn)

    def _check_side_streams(self, fn: Fn, seen: set[tuple[int, int, int]]) -> None:
        """Every stream the call makes current must be forked from the current stream and joined back to it
        (INTEGRITY #3, #13), or the events on the current stream miss its work. Two probes, each decided by
        the device's order, not by a time: (fork) a spin kernel holds the current stream, and a side stream's
        work that completes before the spin does did not wait for it; (join) spin kernels hold the side
        streams, and a current stream that gets past the call before they do did not wait for them."""
        current = BOUND.current_stream(self.device)
        mine = (current.stream_id, current.device_index, current.device_type)
        sides = [
            BOUND.Stream(stream_id=sid, device_index=index, device_type=kind)
            for sid, index, kind in sorted(seen)
            if (sid, index, kind) != mine
        ]
        if not sides:
            return
        hold = int(min(max(1.0, 4 * (self.eager_ms or 0.0)), 500.0) * self._cycles_per_ms)
        unforked, unjoined = self._probe_fork(fn, sides, hold), self._probe_join(fn, sides, hold)
        ids = ", ".join(str(s.stream_id) for s in sides)
        self.notes.append(f"side streams made current by the call: {ids} (forked and joined: checked)")
        if unforked or unjoined:
            what = "; ".join(
                w
                for w in (
                    f"work on stream(s) {', '.join(unforked)} starts without waiting for the current stream"
                    if unforked
                    else "",
                    f"the current stream does not wait for stream(s) {', '.join(unjoined)} before the call returns"
                    if unjoined
                    else "",
                )
                if w
            )
            self.invalid = (
                f"work on an unjoined side stream: {what}, so events on the current stream do not cover all of "
                "the call's work (fork with side.wait_stream(current), join with current.wait_stream(side))"
            )

    def _probe_fork(self, fn: Fn, sides: list[Any], hold: int) -> list[str]:
        BOUND.synchronize(self.device)
        BOUND.spin(hold)
        spun = BOUND.Event()
        BOUND.record(spun)
        fn()
        marks = [(s, BOUND.Event()) for s in sides]
        for s, e in marks:
            BOUND.record(e, s)
        early: set[str] = set()
        while not BOUND.query(spun):  # the current stream still spins: a side mark done now ran ahead
            early |= {str(s.stream_id) for s, e in marks if BOUND.query(e)}
        BOUND.synchronize(self.device)
        return sorted(early)

    def _probe_join(self, fn: Fn, sides: list[Any], hold: int) -> list[str]:
        BOUND.synchronize(self.device)
        for s in sides:
            with BOUND.torch.cuda.stream(s):  # type: ignore[union-attr]
                BOUND.spin(hold)
        fn()
        end = BOUND.Event()
        BOUND.record(end)
        marks = [(s, BOUND.Event()) for s in sides]
        for s, e in marks:
            BOUND.record(e, s)
        BOUND.event_synchronize(end)
        late = [str(s.stream_id) for s, e in marks if not BOUND.query(e)]
        BOUND.synchronize(self.device)
        return late

    def _capture_cold(self, fn: Fn) -> None:
        flush = self._flush
        assert flush is not None

        def with_call() -> None:
            flush()
            fn()

        try:
            self._with_call = capture_graph(with_call, 1, self.device)
            self._flush_only = capture_graph(flush, 1, self.device)
        except Exception as exc:
            self._with_call = self._flush_only = None
            self.notes.append(
                f"cold samples are eager calls between events: the call cannot be captured in a CUDA graph "
                f"({type(exc).__name__}: {str(exc)[:200]}), so each includes the events' own cost (~2.5 µs on an H100)"
            )
            return
        for _ in range(3):  # the graphs' first replays
            self.one(fn)
        self._reset_counts()

    def check_capture(self, outputs: Callable[[], list[Any] | None]) -> None:
        """A captured call must write its own outputs when replayed (INTEGRITY #3, #13). Work a call puts on a
        stream outside the capture runs once, at capture, and never in a replay: its outputs keep the poison
        written before the replay, and the replay's time leaves that work out. Floating outputs are poisoned
        with NaN, others with their dtype's lowest value (True for bool); an output the replay leaves poisoned
        (and that did not read so before) makes the variant invalid, with the reason. The checks are
        reductions to a scalar: no temporaries billed to the variant's memory."""
        replays = [r for r in (self._with_call, getattr(self, "_replay", None)) if r is not None]
        tensors = outputs() if replays else None
        if not tensors:
            return
        watched = [i for i, t in enumerate(tensors) if t.numel() and not _poisoned(t)]
        for replay in replays:
            for i in watched:
                t = tensors[i]
                t.fill_(float("nan") if t.is_floating_point() or t.is_complex() else _sentinel(t))
            replay()
            BOUND.synchronize(self.device)
            left = [i for i in watched if _poisoned(tensors[i])]
            if left:
                self.invalid = (
                    f"a CUDA-graph replay of one call did not write output(s) {', '.join(map(str, left))} (they kept "
                    "the NaN poison written before it): the call's work runs outside its stream (an unjoined side "
                    "stream, the host) or not at all (a result precomputed in setup?), and events time none of it"
                )
                return

    def _reset_counts(self) -> None:
        self.leaks = self.side_stream = 0
        self.tails_ms, self.idle_sync_ms = [], []

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        m = sample_until(lambda: self.one(fn), iterations, rule)
        self._judge(len(m.samples_ms) * (2 if self._with_call is not None else 1), "")
        return m

    def _judge(self, n: int, what: str) -> None:
        """Notes on leaks, and on samples whose device stayed busy after the end event: a hint, not a verdict
        (the fork/join probes decide on side streams; hosts and many-kernel graphs show such tails too)."""
        if self.leaks and what != "warm-up ":  # in warm-up the spin is still growing to fit the host
            self.notes.append(
                f"{what}{self.leaks}/{n} samples: the host took longer to enqueue the work than the spin kernel "
                f"ran (now {self._spin_ms:.2f} ms); those samples may include launch gaps"
            )
        if n and self.side_stream >= max(2, math.ceil(SIDE_STREAM_NOTE_SHARE * n)):
            self.notes.append(
                f"in {self.side_stream}/{n} {what}samples the device was still busy after the end event "
                f"(device-wide sync after it: median {1e3 * statistics.median(self.tails_ms):.0f} µs, max "
                f"{1e3 * max(self.tails_ms):.0f} µs; with nothing pending: median "
                f"{1e3 * statistics.median(self.idle_sync_ms):.0f} µs): work the events may not cover"
            )
        self._reset_counts()

    def measure_batch(self, fn: Fn, per_call_ms: float, rule: StopRule = BATCH_RULE) -> Batch | None:
        calls = min(MAX_GRAPH_BATCH, max(2, math.ceil(GRAPH_BATCH_TARGET_MS / max(per_call_ms, 1e-4))))
        notes: list[str] = []
        try:
            work = capture_graph(fn, calls, self.device)
            how = f"one CUDA-graph replay of {calls} back-to-back calls / {calls}"
        except Exception as exc:
            calls = min(MAX_EAGER_BATCH, max(2, math.ceil(EAGER_BATCH_TARGET_MS / max(per_call_ms, 1e-4))))

            def work() -> None:
                for _ in range(calls):
                    fn()

            how = f"{calls} eager back-to-back calls / {calls}"
            notes.append(
                f"batch not captured in a CUDA graph ({type(exc).__name__}: {str(exc)[:200]}); eager calls, so "
                "it includes the device's per-launch cost"
            )
        self._span(work, flush=False)  # grows the spin to cover enqueueing the batch
        self._reset_counts()
        m = sample_until(lambda: self._span(work, flush=False) / calls, None, rule)
        self._judge(len(m.samples_ms), "batch ")
        how += ", warm L2, start behind the spin kernel"
        return Batch(m.samples_ms, calls, how, m.stop_reason, m.noise, notes)


def _sentinel(t: Any) -> Any:
    import torch

    return True if t.dtype == torch.bool else torch.iinfo(t.dtype).min


def _poisoned(t: Any) -> bool:
    """A floating tensor holding a NaN (a sum propagates it), another one entirely its sentinel."""
    import torch

    if t.is_floating_point() or t.is_complex():
        return bool(torch.isnan(t.sum()).any())
    if t.dtype == torch.bool:
        return bool(t.all())
    return bool(t.max() == _sentinel(t))


class CudaGraphClock(CudaEventClock):
    """Each cold sample times one replay of ``benchmark_fn`` captured in a CUDA graph (falls back to events)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # CudaEventClock's parameters
        super().__init__(*args, **kwargs)
        self.mode = "cuda_graph"
        self.differential = False
        self._replay: Fn | None = None

    @property
    def method(self) -> str:
        base = super().method
        if self._replay is None:
            return base
        return base.replace("CUDA events per call", "CUDA events around one CUDA-graph replay of a call", 1)

    def warmup(self, fn: Fn, n: int) -> None:
        super().warmup(fn, n)  # eager samples first: side streams show only there
        try:
            self._replay = capture_graph(fn, 1, self.device)
        except Exception as exc:
            self.mode = "cuda_event"
            self.fallback = f"cuda_graph capture failed, timed with cuda_event: {type(exc).__name__}: {exc}"[:500]

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        return super().measure(self._replay or fn, iterations, rule)

    def one(self, fn: Fn) -> float:
        return self._span(self._replay or fn, flush=True)


class _ExternalClock:
    """A library's own timer; warm-up and the first call go through a synchronizing perf_counter."""

    mode = "external"
    l2_flushed = False
    invalid: str | None = None

    def __init__(self, device: Any, min_warmup_s: float = 0.0, max_warmup_s: float = 5.0) -> None:
        self.device = device
        self.notes: list[str] = []
        self.fallback: str | None = None
        sync = (lambda: BOUND.synchronize(device)) if getattr(device, "type", "") == "cuda" else None
        if sync is not None:
            BOUND.bind_torch()
        self._inner = CpuClock(sync=sync, min_warmup_s=min_warmup_s, max_warmup_s=max_warmup_s)

    @property
    def warmup_done(self) -> int:
        return self._inner.warmup_done

    @property
    def stable(self) -> bool | None:
        return self._inner.stable

    def first_call(self, fn: Fn) -> float:
        return self._inner.first_call(fn)

    def warmup(self, fn: Fn, n: int) -> None:
        self._inner.warmup(fn, n)
        self.notes += self._inner.notes

    def one(self, fn: Fn) -> float:
        return self._inner.one(fn)

    def measure_batch(self, fn: Fn, per_call_ms: float, rule: StopRule = BATCH_RULE) -> Batch | None:
        return None  # the library's own timer decides how calls are grouped


class TritonClock(_ExternalClock):
    """``triton.testing.do_bench``: its flush, its events, every per-call time kept."""

    mode = "triton"
    l2_flushed = True

    @property
    def method(self) -> str:
        return "triton.testing.do_bench (256 MB cache flush and CUDA events per call, return_mode='all')"

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        from triton.testing import do_bench

        if iterations is None:
            rep_ms = max(rule.min_seconds, min(rule.max_seconds, 1.0)) * 1e3 * 0.5
        else:  # do_bench sizes its repeat count from a time budget: aim for ~iterations calls
            per_call = max(self._inner.one(fn), 1e-3)
            rep_ms = per_call * iterations
        samples = [float(t) for t in do_bench(fn, warmup=0, rep=rep_ms, return_mode="all")]
        if iterations is not None:
            samples = samples[:iterations] if len(samples) >= iterations else samples
        return Measurement(samples, f"do_bench(rep={rep_ms:.1f} ms)", relative_noise(samples), None)


class PytorchClock(_ExternalClock):
    """``torch.utils.benchmark.Timer``: adaptive_autorange, or ``timeit(1)`` per fixed iteration."""

    mode = "pytorch"

    @property
    def method(self) -> str:
        return "torch.utils.benchmark.Timer (each sample = mean of one block of calls; warm L2)"

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        import torch
        from torch.utils.benchmark import Timer

        # Timer defaults to one thread; the variant's own thread count is what the other clocks see.
        timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        if iterations is not None:
            samples = [timer.timeit(1).times[0] * 1e3 for _ in range(iterations)]
            return Measurement(samples, "fixed_iterations")
        m = timer.adaptive_autorange(
            threshold=rule.noise_target * 20,  # the Timer's criterion is IQR/median, not a standard error
            min_run_time=rule.min_seconds,
            max_run_time=rule.max_seconds,
        )
        samples = [t * 1e3 for t in m.times]
        return Measurement(samples, "torch adaptive_autorange", relative_noise(samples), None)


# The floor of warm-up by clock, when the config leaves it unset: on the H100 host a fresh process ran a
# 2.5 µs CPU op ~1.6x slower for its first ~0.3 s (perflab selfcheck's cpu_sum); GPU samples reach a
# steady state within a few calls, which the stability rule checks.
HOST_MIN_WARMUP_S = 0.3
GPU_MIN_WARMUP_S = 0.05


def make_clock(
    mode: str,
    device: Any,
    flush_l2: bool = True,
    spin_ms: float = 0.05,
    min_warmup_s: float | None = None,
    sample_gap: float = 1.0,
    max_warmup_s: float = 5.0,
) -> Clock:
    """The clock for ``mode`` on ``device`` (a torch.device); GPU-only modes fall back on CPU, with reason.
    ``min_warmup_s``: the shortest warm-up (None: by clock); ``sample_gap``: idle after each GPU-event
    sample, a multiple of its span; ``max_warmup_s``: the longest warm-up chasing a steady state."""
    if mode not in MODES:
        raise ValueError(f"timing_mode={mode!r} is not one of {', '.join(MODES)}")
    is_cuda = getattr(device, "type", str(device)) == "cuda"
    if mode == "auto":
        mode = "cuda_event" if is_cuda else "cpu"
    host_min = HOST_MIN_WARMUP_S if min_warmup_s is None else min_warmup_s
    gpu_min = GPU_MIN_WARMUP_S if min_warmup_s is None else min_warmup_s
    if not is_cuda and mode in ("cuda_event", "cuda_graph", "triton"):
        clock = CpuClock(min_warmup_s=host_min, max_warmup_s=max_warmup_s)
        clock.fallback = f"timing_mode={mode!r} needs a CUDA device; device is {device!s}, timed with 'cpu'"
        return clock
    if mode == "cpu":
        if is_cuda:
            BOUND.bind_torch()
            return CpuClock(lambda: BOUND.synchronize(device), host_min, max_warmup_s)
        return CpuClock(min_warmup_s=host_min, max_warmup_s=max_warmup_s)
    if mode == "cuda_event":
        return CudaEventClock(device, flush_l2, spin_ms, sample_gap, gpu_min, max_warmup_s)
    if mode == "cuda_graph":
        return CudaGraphClock(device, flush_l2, spin_ms, sample_gap, gpu_min, max_warmup_s)
    if mode == "triton":
        return TritonClock(device, gpu_min, max_warmup_s)
    return PytorchClock(device, host_min if not is_cuda else gpu_min, max_warmup_s)


def clock_for(config: BenchmarkConfig, device: Any, mode: str | None = None) -> Clock:
    """``make_clock`` with every clock setting taken from ``config`` (``mode`` overrides its timing_mode):
    the one mapping from configuration to clock, for variants, the selfcheck and the kernel sweeps."""
    return make_clock(
        mode or config.timing_mode,
        device,
        config.flush_l2,
        config.launch_spin_ms,
        config.min_warmup_seconds,
        config.sample_gap,
        max_warmup_s=0.5 * config.stage_limit("warmup"),
    )
