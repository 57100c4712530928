"""Energy per call: the GPU board's energy counter (NVML) while the calls run back to back.

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` counts the board's energy in mJ since the driver loaded (Volta and
later). The counter moves in steps, at the driver's update period, and on the A100 and H100 the power behind it is
sampled in only part of each period (Yang, Adamek, Armour 2024, "Part-time power measurements: nvidia-smi's lack
of attention"): a window of a few steps around a short burst of work reads whatever ran when the sensor looked,
and counter readings taken at arbitrary times are off by up to a step's worth of energy at each end. So:

* the calls run **back to back** for ``seconds`` (the batch measurement's unit: a CUDA-graph replay of
  back-to-back calls, eager calls where capture is impossible), ~20 ms of units queued ahead so the GPU never
  idles; the power is then steady on every time scale the sensor sees, and sampling part of the time reads it
  right. (A call that waits for the device itself, a synchronize inside it, runs as it would in a loop.)
* the counter is polled throughout, in a thread of its own (an NVML read between launches left the queue empty:
  H200 windows 10-70 % idle), and only its **steps** are used: the power of a segment is the energy
  between two steps over the host time between them (both ends at a step, so no partial period enters);
  segments begin after ``RAMP_S`` (clocks and power settling) and span at least ``SEGMENT_S``;
* the **time per call** is the window's own (CUDA events around all of its calls ÷ their count): a long window
  can settle at a lower clock than the short batch measurement (a matmul at its power cap), and energy per
  call is the power times the time each call took while that power was drawn.

Each segment gives one sample of energy per call (its power × the window's time per call, W × ms = mJ); a pair's
energy ratio gets a 95 % interval from these samples as the speedup does from times. The figure is the whole
board's energy (idle and memory power included): what running the call costs, not a kernel's share of it.
One GPU per variant; a variant of several ranks is not measured (the note says so).
"""

from __future__ import annotations

import collections
import math
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.measure.guard import BOUND

# Power settles within ~0.1 s of a steady load (clocks boost, then the power controller holds); segments start
# after this much of the window.
RAMP_S = 0.25
# A segment spans at least this long: one step of a counter that steps every 100 ms (the H200's, measured), several
# of one that steps faster.
SEGMENT_S = 0.08
# Work queued ahead of the GPU (in units, at most MAX_DEPTH): the feeder can be late by this much without the GPU
# going idle. A host loop that read NVML between launches left H200 windows 10-70 % idle (gaps in the queue).
QUEUE_MS = 20.0
MAX_DEPTH = 512
# The counter is read every this many seconds (plus the read itself): a step's time is known within it.
POLL_S = 0.0005
# At least this many segments, or the counter moved too rarely to say anything.
MIN_SEGMENTS = 3
# The window's time per call against the batch median: beyond this the clock moved (power cap, throttling).
CLOCK_MOVED = 0.05


@dataclass
class Energy:
    """Energy per call over one window of back-to-back calls (``samples_mj``: one per counter segment)."""

    samples_mj: list[float]
    power_w: list[float]  # each segment's power
    per_call_ms: float  # the window's time per call (CUDA events around all its calls / their count)
    calls: int  # calls run in the window
    window_s: float
    step_ms: float  # the counter's median step period, as observed
    method: str
    notes: list[str] = field(default_factory=list)


class Unavailable(Exception):
    """Energy cannot be measured here; the message says why."""


class EnergyCounter:
    """The board energy counter (mJ) of the GPU CUDA calls ``cuda:index`` (found by UUID, as the snapshots do)."""

    def __init__(self, index: int, uuid: str | None) -> None:
        from bench.measure.machine import nvml_handle

        found = nvml_handle(index, uuid)
        if isinstance(found, str):
            raise Unavailable(found)
        self._handle, read = found, BOUND.nvml_energy
        if read is None:
            raise Unavailable("nvidia-ml-py has no nvmlDeviceGetTotalEnergyConsumption")
        self._read = read
        try:
            self.read()
        except Exception as exc:  # NVMLError_NotSupported before Volta, or a virtualised GPU
            raise Unavailable(f"the GPU's energy counter cannot be read ({type(exc).__name__}: {exc})") from None

    def read(self) -> int:
        return int(self._read(self._handle))


def segments(ticks: list[tuple[float, int]], start: float, min_s: float = SEGMENT_S) -> list[tuple[float, float]]:
    """(seconds, mJ) of consecutive segments between counter steps ``ticks`` ((host time, counter)), from the first
    step at or after ``start``, each at least ``min_s`` long (a short tail is dropped)."""
    steps = [t for t in ticks if t[0] >= start]
    out: list[tuple[float, float]] = []
    if not steps:
        return out
    t0, e0 = steps[0]
    for t, e in steps[1:]:
        if t - t0 >= min_s:
            out.append((t - t0, float(e - e0)))
            t0, e0 = t, e
    return out


class _Poller:
    """Reads the counter in a thread of its own, noting each step as (seconds since ``t0``, mJ): the calls' feeder
    never waits on NVML, and NVML never waits on the feeder (both release the GIL in their C calls)."""

    def __init__(self, read: Callable[[], int], t0: float) -> None:
        self.read, self.t0 = read, t0
        self.ticks: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="perflab-energy", daemon=True)

    def _poll(self) -> None:
        last = self.read()
        while not self._stop.is_set():
            before, value = BOUND.perf_counter(), self.read()
            if value != last:  # the value was taken somewhere inside the read (3 ms on the H200: 3.2 median, 17 max)
                self.ticks.append(((before + BOUND.perf_counter()) / 2 - self.t0, value))
                last = value
            self._stop.wait(POLL_S)

    def __enter__(self) -> _Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run_window(
    work: Callable[[], Any], read: Callable[[], int], seconds: float, unit_ms: float, poller: Callable[..., Any]
) -> tuple[int, float, list[tuple[float, int]]]:
    """Queue ``work`` (a unit of ~``unit_ms``) back to back for ``seconds``, ~QUEUE_MS of units ahead of the GPU,
    while a thread notes the counter's steps; (units run, device ms from the first unit's start to the last's end,
    counter steps)."""
    depth = min(MAX_DEPTH, max(2, math.ceil(QUEUE_MS / max(unit_ms, 1e-3))))
    start, end = BOUND.Event(enable_timing=True), BOUND.Event(enable_timing=True)
    pending: collections.deque[Any] = collections.deque()
    units = 0
    t0 = BOUND.perf_counter()
    with poller(read, t0) as steps:
        BOUND.record(start)
        while True:
            while len(pending) < depth:
                work()
                units += 1
                done = BOUND.Event()
                BOUND.record(done)
                pending.append(done)
            if BOUND.perf_counter() - t0 >= seconds:
                break
            BOUND.event_synchronize(pending.popleft())  # the GPU still has depth - 1 units queued
        BOUND.record(end)
        BOUND.event_synchronize(end)
    return units, float(BOUND.elapsed_time(start, end)), steps.ticks


def measure_energy(
    work: Callable[[], Any], calls_per_unit: int, how: str, counter: Any, seconds: float,
    batch_ms: float | None = None, call_ms: float | None = None, poller: Callable[..., Any] | None = None,
) -> Energy:  # fmt: skip
    """Energy per call of ``work`` (one unit: ``calls_per_unit`` back-to-back calls, described by ``how``) over
    ``seconds`` of units queued back to back; ``batch_ms``, the batch measurement's median per call, for the note
    when the window ran at another speed (else ``call_ms``, any per-call time, sizes the queue). Raises
    ``Unavailable`` when the counter stepped too rarely. ``poller``: what notes the counter's steps (``_Poller``: a
    thread)."""
    BOUND.synchronize(None)
    unit_ms = (batch_ms or call_ms or 1.0) * calls_per_unit
    units, device_ms, ticks = _run_window(work, counter.read, seconds, unit_ms, poller or _Poller)
    calls = units * calls_per_unit
    per_call_ms = device_ms / calls
    parts = segments(ticks, RAMP_S)
    if len(parts) < MIN_SEGMENTS:
        raise Unavailable(
            f"the energy counter stepped {len(ticks)} times in {seconds:g} s, {len(parts)} segments of "
            f">= {SEGMENT_S:g} s after the first {RAMP_S:g} s (need {MIN_SEGMENTS}); raise energy_seconds"
        )
    power = [mj / s / 1e3 for s, mj in parts]  # mJ / s = mW
    gaps = [b[0] - a[0] for a, b in zip(ticks, ticks[1:], strict=False)]
    notes = []
    if batch_ms and abs(per_call_ms / batch_ms - 1) > CLOCK_MOVED:
        notes.append(
            f"calls took {per_call_ms:.4g} ms each in the energy window against {batch_ms:.4g} ms in the batch "
            "measurement: the GPU ran at another speed over the longer window (power cap, clocks)"
        )
    method = (
        f"NVML board energy counter over {device_ms / 1e3:.2f} s of back-to-back calls ({how}); "
        f"{len(parts)} segments between counter steps after the first {RAMP_S:g} s; power x time per call"
    )
    return Energy(
        samples_mj=[p * per_call_ms for p in power], power_w=power, per_call_ms=per_call_ms, calls=calls,
        window_s=device_ms / 1e3, step_ms=1e3 * statistics.median(gaps) if gaps else 0.0, method=method,
        notes=notes,
    )  # fmt: skip
