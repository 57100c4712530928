"""Clocks: how calls of ``benchmark_fn`` become raw samples. Examples never time themselves.

Every clock has one surface — ``first_call(fn)``, ``warmup(fn, n)``, ``measure(fn, iterations, rule)``
— so timing modes plug in without touching the runner. ``iterations=None`` means adaptive: sample
until the relative standard error of the median is under the rule's noise target (bench.stopping).

Modes
-----
``cpu``: ``time.perf_counter`` around each call; on a GPU variant the device is synchronized before
the clock starts and before it stops, so asynchronous work is counted (host launch cost included).

``cuda_event`` (default on GPU): per sample, outside the timed window, (1) L2 is flushed by reading a
buffer of twice the device's L2 size, leaving only clean lines (INTEGRITY #2; off with ``flush_l2=False``,
"warm" then), (2) a
spin kernel (``torch.cuda._sleep``) is queued, then the start event, ``benchmark_fn``'s kernels and the
end event are queued behind it. The GPU is still spinning while the host enqueues the work, so the start
event fires only once the work is queued: the host's launch latency (10–20 µs on an H100, INTEGRITY #1)
stays out of the sample. Right after the host returns from ``benchmark_fn`` the start event is queried;
if it already fired, the spin was shorter than the host's enqueue time, the sample may hold launch gaps,
the spin is doubled and the leak is counted in ``notes``. Side-stream guard (INTEGRITY #3): after the
end event completes, a device-wide synchronize that still waits noticeably means ``benchmark_fn`` left
work on other streams that the events did not cover; such samples are counted and flagged.
Launch-bound calls (a single call under 5 µs after warm-up) are batched: a sample times back-to-back
calls and divides by their number (``calls_per_sample``, recorded; pin it in the config).
The batch is captured once into a CUDA graph (``launch_batching="graph"``, the default) and each sample
replays it: queued eager launches still cost the device ~2 µs each between kernels (an H100 runs a
1024-element add in 1.0 µs inside a graph, 2.0-2.2 µs per kernel back-to-back eagerly; perflab
selfcheck), so an eager batch measures the launch path, not the kernel. A graph launch itself costs
the device ~20 µs before its first kernel, so a graph batch spans ~4 ms of calls (at most 4000),
an eager one ~0.2 ms (at most 1000). When capture is impossible the batch runs
eagerly and the reason is recorded; ``launch_batching="eager"`` asks for eager batches.

``cuda_graph``: ``benchmark_fn`` is captured once into a CUDA graph after warm-up and each sample times
one replay exactly as ``cuda_event`` times a call (flush, spin, events); launch-bound calls are batched
as ``cuda_event`` batches them (a graph of ``calls_per_sample`` calls). Launch overhead between the
kernels of one call disappears. When capture is impossible (host syncs, CPU work, dynamic shapes) the
clock falls back to ``cuda_event`` and records why.

``triton``: ``triton.testing.do_bench`` (its own 256 MB cache flush, events per call, no launch-gap
hiding); all of its per-call times are kept as samples. GPU only.

``pytorch``: ``torch.utils.benchmark.Timer.adaptive_autorange``; each sample is the mean of one block
of calls (the Timer's unit), CPU or GPU (it synchronizes CUDA itself).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from bench.stopping import Measurement, StopRule, relative_noise, sample_until

if TYPE_CHECKING:
    from bench.config import BenchmarkConfig

Fn = Callable[[], Any]

MODES = ("auto", "cpu", "cuda_event", "cuda_graph", "triton", "pytorch")
BATCHING = ("graph", "eager")
_MAX_SPIN_MS = 50.0
# Auto-batching of launch-bound calls (calls_per_sample=None): below this single-call time a sample
# times back-to-back calls lasting about BATCH_TARGET_MS.
BATCH_BELOW_MS = 0.005
BATCH_TARGET_MS = 0.2
# ... and up to PROBE_BELOW_MS, a call whose single-call sample reads OVERHEAD_RATIO x or more its time per
# call back to back: the sample is mostly the host's per-sample cost (events, the kernel's launch on the
# device), which differs by host. The H200 x 2 host read a 1 us add's sample as 5.1-5.5 us (H100 and a
# one-GPU H200 host: 3.5 us; graph per call 1.0-1.1 us on all three): the fixed 5 us line left it
# unbatched in some runs (+400 %), session 6.
PROBE_BELOW_MS = 0.05
OVERHEAD_RATIO = 1.5
MAX_BATCH = 1000
# A batch captured in one CUDA graph: a graph launch costs the device ~20 us before its first kernel
# (H100: a 52-call graph of a 1.0 us add read 1.42 us per call; the 1000-call truth 1.02 us), so graph
# batches are sized to amortise it (~4 ms of calls: under 1 % of it per call).
GRAPH_BATCH_TARGET_MS = 4.0
MAX_GRAPH_BATCH = 4000
# A device-wide sync still waiting this long after the end event means work on another stream.
_SIDE_STREAM_MIN_MS = 0.05
_SIDE_STREAM_FRACTION = 0.1
# ... in at least this share of the samples (fewer is host jitter: 1-7 of ~240 on an H100 host).
SIDE_STREAM_MIN_SHARE = 0.2


class Clock(Protocol):
    mode: str  # the mode actually used
    l2_flushed: bool
    notes: list[str]
    fallback: str | None  # why the requested mode could not be used

    @property
    def method(self) -> str: ...

    def first_call(self, fn: Fn) -> float: ...

    def warmup(self, fn: Fn, n: int) -> None: ...

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement: ...


@dataclass
class CpuClock:
    """perf_counter around each call; synchronizes the GPU first when the variant runs on one.

    Warm-up lasts at least ``min_warmup_s`` of calls, however few the configured count: on the H100
    host a fresh process ran a 2.5 µs CPU op at ~4 µs for its first ~0.3 s (perflab selfcheck's
    cpu_sum: repeats 4.28, 3.93, then 2.47-2.78 µs in one process), so a count of calls alone let the
    first measurement catch that phase.
    """

    sync: Callable[[], None] | None = None
    min_warmup_s: float = 0.3
    warmup_done: int = 0  # warm-up calls actually made (the count asked for, or more to fill min_warmup_s)
    mode: str = "cpu"
    l2_flushed: bool = False
    notes: list[str] = field(default_factory=list)
    fallback: str | None = None

    @property
    def method(self) -> str:
        extra = ", device synchronized before start and stop" if self.sync else ""
        return f"time.perf_counter around each call{extra}; warm-up at least {self.min_warmup_s:g} s of calls"

    def _one(self, fn: Fn) -> float:
        if self.sync:
            self.sync()
        t0 = time.perf_counter()
        fn()
        if self.sync:
            self.sync()
        return (time.perf_counter() - t0) * 1e3

    def first_call(self, fn: Fn) -> float:
        return self._one(fn)

    def warmup(self, fn: Fn, n: int) -> None:
        t_end = time.perf_counter() + self.min_warmup_s
        done = 0
        while done < n or time.perf_counter() < t_end:
            self._one(fn)
            done += 1
        self.warmup_done = done

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        return sample_until(lambda: self._one(fn), iterations, rule)


class L2Flush:
    """Reads a buffer of twice the device's L2 size (INTEGRITY #2): no line of earlier work survives.

    A read, not a write: L2 ends up full of clean lines, so the timed work's evictions cost nothing.
    A write-based flush (``zero_``) leaves 2x L2 of dirty lines whose write-back lands inside the next
    sample (+7 us on a 128 MiB op on an H100, measured by perflab selfcheck). The read is an fp32 sum
    into a preallocated scalar: no temporary (an int32 sum with ``dtype=int64`` first materialises an
    int64 copy, 2x the buffer *written*: seen on the H100 as +200 MB of peak memory).
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

    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        graph.replay()
        torch.cuda.synchronize(device)
    except Exception:
        torch.cuda.synchronize(device)
        raise
    return graph.replay


class CudaEventClock:
    """CUDA events with L2 flush, launch latency hidden behind a spin kernel, side-stream guard."""

    mode = "cuda_event"

    def __init__(
        self,
        device: Any,
        flush_l2: bool = True,
        calls_per_sample: int | None = None,
        launch_batching: str = "graph",
        spin_ms: float = 0.05,
        sample_gap: float = 1.0,
    ) -> None:
        import torch

        if launch_batching not in BATCHING:
            raise ValueError(f"launch_batching={launch_batching!r} is not one of {', '.join(BATCHING)}")
        self.launch_batching = launch_batching
        self._batch: Fn | None = None  # graph replay of calls_per_sample calls, when captured

        self._torch = torch
        self.device = device
        self.l2_flushed = flush_l2
        self.notes: list[str] = []
        self.fallback: str | None = None
        self.leaks = 0
        self.side_stream = 0
        self.tails_ms: list[float] = []  # per sample: the device-wide sync's wait after the end event,
        self.idle_sync_ms: list[float] = []  # and a second sync's, with nothing left to wait for
        self._flush = L2Flush(device) if flush_l2 else None
        self.overhead_bytes = self._flush.bytes if self._flush is not None else 0
        self.calls_per_sample = calls_per_sample or 1
        self._auto_batch = calls_per_sample is None
        self._cycles_per_ms = self._calibrate()
        self._spin_ms = spin_ms  # grows (doubling) whenever a sample shows the host outran it
        self.sample_gap = sample_gap  # idle after each sample, as a multiple of its span

    @property
    def method(self) -> str:
        flush = "L2 flushed (2x L2 read) before each sample" if self.l2_flushed else "warm L2 (no flush)"
        if self.calls_per_sample == 1:
            per = "per call"
        elif self._batch is not None:
            per = f"around one CUDA-graph replay of {self.calls_per_sample} calls / that"
        else:
            per = f"around {self.calls_per_sample} back-to-back calls / that"
        gap = f"; GPU idle {self.sample_gap:g}x the sample's span after each sample" if self.sample_gap else ""
        return f"CUDA events {per}, start queued behind a spin kernel to hide launch latency; {flush}{gap}"

    def _calibrate(self) -> float:
        torch = self._torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 1_000_000
        torch.cuda._sleep(cycles)  # first launch loads the kernel
        torch.cuda.synchronize(self.device)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        return cycles / max(start.elapsed_time(end), 1e-3)

    def _one(self, fn: Fn) -> float:
        torch = self._torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self._flush is not None:
            self._flush()
        torch.cuda._sleep(int(self._spin_ms * self._cycles_per_ms))
        start.record()
        if self._batch is not None:
            self._batch()
        else:
            for _ in range(self.calls_per_sample):
                fn()
        leaked = start.query()  # GPU reached the start before the host finished enqueueing
        end.record()
        end.synchronize()
        t0 = time.perf_counter()
        torch.cuda.synchronize(self.device)  # device-wide: waits for other streams too
        t1 = time.perf_counter()
        torch.cuda.synchronize(self.device)  # nothing left: what a synchronize costs this host right now
        t2 = time.perf_counter()
        # Work on another stream is what the first sync waited beyond the cost of a sync itself (a host
        # whose synchronize alone took > 50 µs flagged a plain 43 µs kernel in 40 % of samples, H100 call N).
        self.tails_ms.append((t1 - t0) * 1e3)
        self.idle_sync_ms.append((t2 - t1) * 1e3)
        tail_ms = ((t1 - t0) - (t2 - t1)) * 1e3
        span = float(start.elapsed_time(end))
        sample = span / self.calls_per_sample
        # Against the span the events covered (the whole batch), not the per-call share: a batch of 1000
        # 1 µs calls spans 1 ms, and its host's ordinary jitter after it is not another stream's work.
        if tail_ms > max(_SIDE_STREAM_MIN_MS, _SIDE_STREAM_FRACTION * span):
            self.side_stream += 1
        if leaked:
            self.leaks += 1
            self._spin_ms = min(self._spin_ms * 2, _MAX_SPIN_MS)
        if self.sample_gap > 0:
            time.sleep(self.sample_gap * span / 1e3)
        return sample

    def first_call(self, fn: Fn) -> float:
        torch = self._torch
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize(self.device)
        return (time.perf_counter() - t0) * 1e3

    def _batch_in_graph(self, fn: Fn) -> None:
        """Capture the batch into one CUDA graph (launch_batching="graph"); on failure batch eagerly, noted."""
        if self.launch_batching != "graph":
            return
        try:
            self._batch = capture_graph(fn, self.calls_per_sample, self.device)
        except Exception as exc:
            self._batch = None
            self.notes.append(
                f"launch-bound batch not captured in a CUDA graph ({type(exc).__name__}: {str(exc)[:200]}); "
                "batched eagerly, so the samples include the device's per-launch cost"
            )

    def warmup(self, fn: Fn, n: int) -> None:
        samples = [self._one(fn) for _ in range(n)]  # also grows the spin to cover the host's enqueue
        if self._auto_batch and samples:
            # The fastest warm-up sample: one the host outran (a launch gap inside it) only reads slower,
            # and a fresh process's host is slow for its first ~0.3 s. On the H100 (session 4) the
            # median of 4 such samples once read > 5 us for a 1 us add, and it went unbatched: +258 %.
            single = min(samples)
            if single < BATCH_BELOW_MS or (single < PROBE_BELOW_MS and self._overhead_bound(fn, single)):
                # Launch-bound: one call is shorter than the event/launch overheads around it, so a sample
                # times back-to-back calls (~BATCH_TARGET_MS) and divides (the graph-replay way).
                graph = self.launch_batching == "graph"
                target, cap = (GRAPH_BATCH_TARGET_MS, MAX_GRAPH_BATCH) if graph else (BATCH_TARGET_MS, MAX_BATCH)
                self.calls_per_sample = min(cap, max(2, math.ceil(target / max(single, 1e-4))))
        if self.calls_per_sample > 1 and self._batch is None:
            self._batch_in_graph(fn)
            if self._batch is None and self._auto_batch and self.calls_per_sample > MAX_BATCH:
                self.calls_per_sample = max(2, self.calls_per_sample * MAX_BATCH // MAX_GRAPH_BATCH)  # eager size
            for _ in range(12):  # let the spin grow until it covers enqueueing the whole batch
                self.leaks = 0
                self._one(fn)
                if not self.leaks:
                    break
        self.leaks = self.side_stream = 0
        self.tails_ms, self.idle_sync_ms = [], []

    def _overhead_bound(self, fn: Fn, single: float) -> bool:
        """Whether the single-call sample (``single`` ms) is OVERHEAD_RATIO x or more the time per call of
        ~BATCH_TARGET_MS of back-to-back eager calls: then it times the host's per-sample cost more than
        the call, and the call is batched. The evidence goes into the notes."""
        self.calls_per_sample = max(8, min(MAX_BATCH, math.ceil(BATCH_TARGET_MS / max(single, 1e-4))))
        clean: list[float] = []
        try:
            # Only samples the host did not outrun: a leaked one times the host's enqueueing of the calls
            # (~5 µs per eager launch on the H200 x 2 host), not the device (each leak doubles the spin).
            for _ in range(15):
                self.leaks = 0
                t = self._one(fn)
                if not self.leaks:
                    clean.append(t)
                if len(clean) == 3:
                    break
        finally:
            batch, self.calls_per_sample, self.leaks = self.calls_per_sample, 1, 0
        if not clean:
            return False  # never a clean batch: no evidence either way, the fixed line decides
        per_call = min(clean)
        bound = single >= OVERHEAD_RATIO * per_call
        if bound:
            self.notes.append(
                f"launch-bound: a single-call sample read {1e3 * single:.2f} µs, {1e3 * per_call:.2f} µs per call "
                f"in {batch} back-to-back calls ({single / per_call:.1f}x; batched from {OVERHEAD_RATIO:g}x)"
            )
        return bound

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        m = sample_until(lambda: self._one(fn), iterations, rule)
        n = len(m.samples_ms)
        if self.calls_per_sample > 1:
            how = "one CUDA-graph replay of" if self._batch is not None else "back-to-back"
            warm = "; L2 is flushed before the batch, so calls after the first may hit a warm L2"
            warm = warm if self.l2_flushed else ""
            self.notes.append(f"batched: each sample times {how} {self.calls_per_sample} calls{warm}")
        if self.leaks:
            self.notes.append(
                f"{self.leaks}/{n} samples: the host took longer to enqueue benchmark_fn than the spin "
                f"kernel ran (now {self._spin_ms:.2f} ms); those samples may include launch gaps"
            )
        # One slow synchronize is host jitter (an interrupt, the GC); a side stream shows up again and again.
        if self.side_stream >= max(2, math.ceil(SIDE_STREAM_MIN_SHARE * n)):
            self.notes.append(
                f"side streams: in {self.side_stream}/{n} samples the device was still busy after the end "
                "event; benchmark_fn leaves work on other streams that events on the current stream miss "
                f"(device-wide sync after the end event: median {1e3 * statistics.median(self.tails_ms):.0f} µs, "
                f"max {1e3 * max(self.tails_ms):.0f} µs; a sync with nothing pending: median "
                f"{1e3 * statistics.median(self.idle_sync_ms):.0f} µs)"
            )
        return m


class CudaGraphClock(CudaEventClock):
    """Times replays of ``benchmark_fn`` captured once in a CUDA graph (falls back to events)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # CudaEventClock's parameters
        super().__init__(*args, **kwargs)
        self.mode = "cuda_graph"
        self._replay: Fn | None = None
        self._fn: Fn | None = None

    @property
    def method(self) -> str:
        base = super().method
        if self._batch is not None:
            return base
        return base.replace("CUDA events", "CUDA events (one CUDA-graph replay per call)", 1)

    def capture(self, fn: Fn) -> None:
        try:
            self._replay = capture_graph(fn, 1, self.device)
        except Exception as exc:
            self.mode = "cuda_event"
            self.fallback = f"cuda_graph capture failed, timed with cuda_event: {type(exc).__name__}: {exc}"[:500]

    def _batch_in_graph(self, fn: Fn) -> None:
        # A batch is a graph of calls_per_sample calls of benchmark_fn itself (not of replays).
        if self._replay is not None and self._fn is not None:
            super()._batch_in_graph(self._fn)

    def warmup(self, fn: Fn, n: int) -> None:
        for _ in range(n):
            fn()
        self._torch.cuda.synchronize(self.device)
        self._fn = fn
        self.capture(fn)
        super().warmup(self._replay or fn, max(n, 3))

    def measure(self, fn: Fn, iterations: int | None, rule: StopRule) -> Measurement:
        return super().measure(self._replay or fn, iterations, rule)


class _ExternalClock:
    """A library's own timer; warm-up and the first call go through a synchronizing perf_counter."""

    mode = "external"
    l2_flushed = False

    def __init__(self, device: Any) -> None:
        import torch

        self.device = device
        self.notes: list[str] = []
        self.fallback: str | None = None
        sync = (lambda: torch.cuda.synchronize(device)) if getattr(device, "type", "") == "cuda" else None
        self._inner = CpuClock(sync=sync, min_warmup_s=0.0)  # their own warm-up and sampling rules

    def first_call(self, fn: Fn) -> float:
        return self._inner.first_call(fn)

    def warmup(self, fn: Fn, n: int) -> None:
        self._inner.warmup(fn, n)


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
            per_call = max(self._inner._one(fn), 1e-3)
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


def make_clock(
    mode: str,
    device: Any,
    flush_l2: bool = True,
    calls_per_sample: int | None = None,
    launch_batching: str = "graph",
    spin_ms: float = 0.05,
    min_warmup_s: float = 0.3,
    sample_gap: float = 1.0,
) -> Clock:
    """The clock for ``mode`` on ``device`` (a torch.device); GPU-only modes fall back on CPU, with reason.
    ``min_warmup_s``: the cpu clock's shortest warm-up (``BenchmarkConfig.min_warmup_seconds``);
    ``sample_gap``: idle after each GPU-event sample, a multiple of its span (``BenchmarkConfig.sample_gap``)."""
    if mode not in MODES:
        raise ValueError(f"timing_mode={mode!r} is not one of {', '.join(MODES)}")
    is_cuda = getattr(device, "type", str(device)) == "cuda"
    if mode == "auto":
        mode = "cuda_event" if is_cuda else "cpu"
    if not is_cuda and mode in ("cuda_event", "cuda_graph", "triton"):
        clock = CpuClock(min_warmup_s=min_warmup_s)
        clock.fallback = f"timing_mode={mode!r} needs a CUDA device; device is {device!s}, timed with 'cpu'"
        return clock
    if mode == "cpu":
        if is_cuda:
            import torch

            return CpuClock(sync=lambda: torch.cuda.synchronize(device), min_warmup_s=min_warmup_s)
        return CpuClock(min_warmup_s=min_warmup_s)
    if mode == "cuda_event":
        return CudaEventClock(device, flush_l2, calls_per_sample, launch_batching, spin_ms, sample_gap)
    if mode == "cuda_graph":
        return CudaGraphClock(device, flush_l2, calls_per_sample, launch_batching, spin_ms, sample_gap)
    if mode == "triton":
        return TritonClock(device)
    return PytorchClock(device)


def clock_for(config: BenchmarkConfig, device: Any, mode: str | None = None) -> Clock:
    """``make_clock`` with every clock setting taken from ``config`` (``mode`` overrides its timing_mode):
    the one mapping from configuration to clock, for variants, the selfcheck and the kernel sweeps."""
    return make_clock(
        mode or config.timing_mode,
        device,
        config.flush_l2,
        config.calls_per_sample,
        config.launch_batching,
        config.launch_spin_ms,
        config.min_warmup_seconds,
        config.sample_gap,
    )
