"""Clocks: how calls of ``benchmark_fn`` become raw samples. Examples never time themselves.

Two measurement kinds, as nvbench names them, both kept:

* **cold** (the primary ``time_*`` metrics): one call per sample with L2 flushed (a read of twice the
  device's L2, INTEGRITY #2), queued behind a spin kernel so the host's launch latency (10-20 µs on an
  H100, INTEGRITY #1) stays out. Where the call can be captured in a CUDA graph, each sample is a
  difference: CUDA events around one replay of a graph [flush, call] minus the median of the recent
  replays of a graph [flush] alone, so the events' own cost and the device's start of a kernel after an
  event (~2.5 µs: a 1 µs add read 3.5 µs per call, an 8 MiB op 9.5 µs against Nsight Compute's 6.8)
  cancel, and the call's kernels run as they would after a flush, on a cold L2. Otherwise events around
  one eager call, noted.
* **batch** (``batch_time_*``): back-to-back calls captured in one CUDA graph (~4 ms of them) and
  replayed, the replay timed with events and divided by its calls: what a call costs in a stream of
  calls, with warm L2 (INTEGRITY #14). Eager back-to-back calls when capture is impossible, noted.

A pair's speedup uses cold unless its config asks for batch (``speedup_time``), and says which.

Every clock has one surface: ``first_call(fn)``, ``warmup(fn, n)``, ``measure(fn, iterations, rule)``,
``measure_batch(fn, per_call_ms, rule)``. Clocks call only the functions ``bench.measure.guard.BOUND`` captured
before any benchmark code ran; a benchmark that replaces a timer is caught by ``bench.measure.guard.tampered``.

Warm-up (INTEGRITY #8, #15): at least the configured count and ``min_warmup_s``, then on until the
median of the last window of samples (``STABLE_WINDOW`` calls, fewer for calls that span ``STABLE_SPAN_S``) is
within ``STABLE_TOLERANCE`` of the window's before (a steady state), at most ``max_warmup_s``. Sampling stops
on a noise target (bench.measure.stopping).

Modes: ``cpu`` (``perf_counter`` around each call; on a GPU variant the device is synchronized before
the clock starts and before it stops, so all streams' work and the host's launch cost are counted);
``cuda_event`` (default on GPU: the cold protocol above; warm-up samples are eager calls between
events; every stream they make current must be forked from the current stream and joined back, and a
captured call must write its outputs in a replay, or the variant is invalid: bench.measure.streams,
INTEGRITY #3); ``cuda_graph`` (each cold sample one replay of a graph of one call: launch overhead
between a call's kernels disappears; falls back to ``cuda_event``
with the reason); ``triton`` (``triton.testing.do_bench``); ``pytorch`` (``torch.utils.benchmark``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.measure.guard import BOUND
from bench.measure.stopping import Measurement, StopRule, relative_noise, sample_until

Fn = Callable[[], Any]

MODES = ("auto", "cpu", "cuda_event", "cuda_graph", "triton", "pytorch")
# Eager batches (back-to-back calls without a graph) span ~1 ms of calls.
EAGER_BATCH_TARGET_MS = 1.0
MAX_EAGER_BATCH = 1000
# Warm-up to a steady state: the last window's median within this of the window before. A window is
# STABLE_WINDOW calls, or fewer calls that span STABLE_SPAN_S (at least one): the transients it waits out (a fresh
# process's first calls, a clock's ramp) last milliseconds to a few calls, while on the CPU host a later round's
# child of a 0.4 s call made 14 calls, 10 of them warm-up.
STABLE_WINDOW = 5
STABLE_SPAN_S = 0.5
STABLE_TOLERANCE = 0.10
# The batch measurement's effort: enough samples for its median, a fraction of the cold one's time (``batch_rule``).
BATCH_RULE = StopRule(min_samples=10, min_seconds=0.02, max_seconds=0.3)
# At most this share of the cold measurement's time, and never less than the floor: a trivial call's batch ran to
# its 0.3 s ceiling on the busy 2-core host (no 0.5 % noise there) after a cold measurement of 0.03 s.
BATCH_SHARE = 0.5
BATCH_FLOOR_S = 0.05


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


def batch_rule(cold_s: float) -> StopRule:
    """The batch's stopping rule after a cold measurement of ``cold_s`` seconds: ``BATCH_RULE``, its ceiling
    ``BATCH_SHARE`` of the cold one's time (at least ``BATCH_FLOOR_S``)."""
    ceiling = min(BATCH_RULE.max_seconds, max(BATCH_FLOOR_S, BATCH_SHARE * cold_s))
    return StopRule(BATCH_RULE.noise_target, BATCH_RULE.min_samples, min(BATCH_RULE.min_seconds, ceiling), ceiling)


def warm_up(
    one: Callable[[], float],
    n: int,
    min_s: float,
    max_s: float,
    now: Callable[[], float] | None = None,
    steady: float | None = None,
) -> tuple[list[float], bool]:
    """Samples of ``one()`` (ms): at least ``n`` and ``min_s`` seconds of them, then until the median of the
    last ``STABLE_WINDOW`` is within ``STABLE_TOLERANCE`` of the window's before, or ``max_s`` has passed
    (then ``False``: no steady state). A count alone let a fresh process's slow first calls become the
    sample (INTEGRITY #15). ``now``: the clock of elapsed seconds (every rank's the same: bench.measure.collective).
    ``steady``: the steady state this process reached before (``reached``; a kept child's later round): one window
    within ``STABLE_TOLERANCE`` of it is steady again, without a second window to compare it with."""
    now = now or BOUND.perf_counter
    t0 = now()
    samples: list[float] = []
    while True:
        samples.append(one())
        elapsed = now() - t0
        if len(samples) >= n and elapsed >= min_s and (_stable(samples) or _back_to(steady, samples)):
            return samples, True
        if len(samples) >= n and elapsed >= max_s:
            return samples, False


def stable_window(call_ms: float) -> int:
    """Calls in a steady-state window for calls of ``call_ms``: STABLE_WINDOW, fewer where they span STABLE_SPAN_S."""
    return max(1, min(STABLE_WINDOW, math.ceil(STABLE_SPAN_S * 1e3 / max(call_ms, 1e-6))))


def _window(samples: list[float]) -> int:
    """The steady-state window for these warm-up samples: by the latest calls, not the first slow ones."""
    return stable_window(statistics.median(samples[-STABLE_WINDOW:]))


def reached(samples: list[float]) -> float:
    """The steady state a warm-up that ended steady reached: the median of its last window (``warm_up``'s
    ``steady`` in the process's next warm-up)."""
    return statistics.median(samples[-_window(samples) :])


def _back_to(steady: float | None, samples: list[float]) -> bool:
    if steady is None:
        return False
    w = _window(samples)
    return len(samples) >= w and abs(statistics.median(samples[-w:]) - steady) <= STABLE_TOLERANCE * max(steady, 1e-9)


def _stable(samples: list[float]) -> bool:
    w = _window(samples)
    if len(samples) < 2 * w:
        return False
    last = statistics.median(samples[-w:])
    before = statistics.median(samples[-2 * w : -w])
    return abs(last - before) <= STABLE_TOLERANCE * max(before, 1e-9)


def warmup_count(config: Any, first_ms: float, again: bool = False) -> int:
    """Warm-up calls after the first, at least: ``config.warmup`` - 1 where it was set; by default at most the two
    steady-state windows a call of ``first_ms`` needs anyway (a slow call's default count was 4 calls of seconds
    each, in every round's child), one where the process warms up ``again`` to a steady state it reached before."""
    n = max(config.warmup - 1, 0)
    return n if "warmup" in config.model_fields_set else min(n, (1 if again else 2) * stable_window(first_ms))


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
    steady: float | None = None  # the steady state its last warm-up reached (warm_up's ``steady``)
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
        samples, self.stable = warm_up(
            lambda: self.one(fn), n, self.min_warmup_s, self.max_warmup_s, steady=self.steady
        )
        self.warmup_done = len(samples)
        self.steady = reached(samples) if self.stable else None
        if not self.stable:
            self.notes.append(unsteady(samples, self.max_warmup_s))

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


def unsteady(samples: list[float], max_s: float) -> str:
    tail = ", ".join(f"{1e3 * s:.2f}" for s in samples[-2 * STABLE_WINDOW :])
    return (
        f"warm-up: no steady state after {len(samples)} calls and {max_s:g} s (the last calls, µs: {tail}); "
        "the machine may be busy"
    )


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
