"""The GPU clocks: CUDA events around each sample, the start queued behind a spin kernel so the host's launch
latency stays out (INTEGRITY #1), L2 flushed before each cold sample (#2), work left on another stream caught
(#3, #13); batches of back-to-back calls captured in one CUDA graph (#14). bench.measure.clocks says what the
cold and the batch times are; every call goes through the functions ``bench.measure.guard.BOUND`` captured
before any benchmark code ran.
"""

from __future__ import annotations

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
    Fn,
    reached,
    unsteady,
    warm_up,
)
from bench.measure.guard import BOUND
from bench.measure.stopping import Measurement, StopRule, sample_until
from bench.measure.streams import side_streams, unjoined, unwritten

_MAX_SPIN_MS = 50.0
# A captured graph's first replays refit the spin: this many in a row without the host outrunning it, at most MAX.
FIT_REPLAYS = 3
MAX_FIT_REPLAYS = 16
# Batch sizes: a graph launch costs the device ~20 µs before its first kernel (H100: a 52-call graph of a
# 1.0 µs add read 1.42 µs per call, 1000 calls 1.02 µs), so graph batches span ~4 ms of calls.
GRAPH_BATCH_TARGET_MS = 4.0
MAX_GRAPH_BATCH = 4000
# A batch of more calls replays a graph of this many back to back: capturing a call costs the host ~10-20 µs
# (a 4,000-call graph of a trivial op took longer to capture than its whole measurement).
GRAPH_CAPTURE_CALLS = 500
# A device-wide sync still waiting this long after the end event, in at least this share of the samples, is
# noted (1-7 of ~240 samples on an H100 host are host jitter).
_SIDE_STREAM_MIN_MS = 0.05
_SIDE_STREAM_FRACTION = 0.1
SIDE_STREAM_NOTE_SHARE = 0.2
# Cold samples of a captured call subtract the median span of this many recent [flush] replays.
FLUSH_WINDOW = 9


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


def replayed_graph(fn: Fn, calls: int, device: Any, captured: int = GRAPH_CAPTURE_CALLS) -> tuple[Fn, int, str]:
    """At least ``calls`` back-to-back calls of ``fn`` as replays of one CUDA graph of at most ``captured`` calls:
    (the work, its calls, how). Raises if the graph cannot be captured."""
    replays = math.ceil(calls / captured)
    captured = math.ceil(calls / replays)
    replay = capture_graph(fn, captured, device)
    if replays == 1:
        return replay, captured, f"one CUDA-graph replay of {captured} back-to-back calls / {captured}"

    def work() -> None:
        for _ in range(replays):
            replay()

    total = replays * captured
    return work, total, f"{replays} back-to-back CUDA-graph replays of {captured} calls / {total}"


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
        self._spin_ms = self._spin_start = spin_ms  # grows (doubling) whenever a sample shows the host outran it
        self.sample_gap = sample_gap  # idle after each sample, as a multiple of its span
        self.min_warmup_s, self.max_warmup_s = min_warmup_s, max_warmup_s
        self.warmup_done = 0
        self.stable: bool | None = None
        self.steady: float | None = None  # the steady state its last warm-up reached (warm_up's ``steady``)
        self.differential = flush_l2  # cold samples as graph differences, when the call can be captured
        self._with_call: Fn | None = None  # replay of a graph [flush, call]
        self._flush_only: Fn | None = None  # replay of a graph [flush]
        self._flush_spans: list[float] = []  # its spans so far
        self.eager_ms: float | None = None  # median eager cold call at the end of warm-up
        self.batch_unit: tuple[Fn, int, str] | None = None  # the batch's unit: (work, its calls, how)

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
        self._before_sample()
        if flush and self._flush is not None:
            self._flush()
        BOUND.spin(int(self._spin_ms * self._cycles_per_ms))
        self._align()
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
        span = self._agreed(span)
        if self.sample_gap > 0:
            BOUND.sleep(self.sample_gap * span / 1e3)
        return span

    # Hooks for a clock of several ranks (bench.measure.collective): on one GPU, nothing.
    def _before_sample(self) -> None:
        """Before the flush: the ranks' hosts meet."""

    def _align(self) -> None:
        """After the spin kernel is queued, before the start event: the ranks' streams meet."""

    def _agreed(self, span: float) -> float:
        """The sample every rank takes from this one's ``span`` (ms)."""
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
            samples, self.stable = warm_up(
                lambda: self.eager(fn), n, self.min_warmup_s, self.max_warmup_s, steady=self.steady
            )
        self.warmup_done = len(samples)
        self.steady = reached(samples) if self.stable else None
        self.eager_ms = statistics.median(samples[-STABLE_WINDOW:])
        if not self.stable:
            self.notes.append(unsteady(samples, self.max_warmup_s))
        self._judge(len(samples), "warm-up ")
        self._check_side_streams(fn, seen)
        if self.differential and self.invalid is None:
            self._capture_cold(fn)

    def _check_side_streams(self, fn: Fn, seen: set[tuple[int, int, int]]) -> None:
        """Every stream the call makes current must be forked from the current stream and joined back to it
        (bench.measure.streams); the probes hold the streams with spin kernels of 4x the eager call."""
        sides = side_streams(self.device, seen)
        if not sides:
            return
        hold = int(min(max(1.0, 4 * (self.eager_ms or 0.0)), 500.0) * self._cycles_per_ms)
        reason = unjoined(fn, self.device, sides, hold)
        ids = ", ".join(str(s.stream_id) for s in sides)
        self.notes.append(f"side streams made current by the call: {ids} (forked and joined: checked)")
        if reason:
            self.invalid = reason

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
        self._fit_spin(lambda: self.one(fn))

    def _fit_spin(self, replay: Fn) -> None:
        """After a capture: the spin back to its start, grown again by the graph's first replays only as far as
        enqueueing a replay needs (eager warm-up calls of 1,024 kernels had grown it to 50 ms, paid twice in each
        cold sample of 7 ms: 110 ms a sample on the H200), until FIT_REPLAYS in a row did not outrun it."""
        self._spin_ms, clean = self._spin_start, 0
        for _ in range(MAX_FIT_REPLAYS):
            leaks = self.leaks
            replay()
            clean = clean + 1 if self.leaks == leaks else 0
            if clean >= FIT_REPLAYS:
                break
        self._reset_counts()

    def check_capture(self, outputs: Callable[[], list[Any] | None]) -> None:
        """A captured call must write its own outputs when replayed (bench.measure.streams): one that leaves
        them poisoned makes the variant invalid, with the reason."""
        replays = [r for r in (self._with_call, getattr(self, "_replay", None)) if r is not None]
        reason = unwritten(replays, outputs, self.device)
        if reason:
            self.invalid = reason

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
            work, calls, how = replayed_graph(fn, calls, self.device)
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
        self.batch_unit = (work, calls, how)  # what the energy window runs back to back (bench.measure.energy)
        self._span(work, flush=False)  # grows the spin to cover enqueueing the batch
        self._reset_counts()
        m = sample_until(lambda: self._span(work, flush=False) / calls, None, rule)
        self._judge(len(m.samples_ms), "batch ")
        how += ", warm L2, start behind the spin kernel"
        return Batch(m.samples_ms, calls, how, m.stop_reason, m.noise, notes)


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
            return
        self._fit_spin(lambda: self.one(fn))

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        return super().measure(self._replay or fn, iterations, rule)

    def one(self, fn: Fn) -> float:
        return self._span(self._replay or fn, flush=True)
