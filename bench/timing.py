"""Clocks: how one call of ``benchmark_fn`` becomes one raw sample. Examples never time themselves.

Every clock has the same surface — ``first_call(fn)``, ``warmup(fn, n)``, ``sample(fn, n)`` — so
timing modes plug in without touching the runner.

``cpu`` (``time.perf_counter``): one call per sample. When the variant runs on a GPU, the device is
synchronized before the clock starts and before it stops, so asynchronous work is counted.

``cuda_event`` (default on GPU): per sample, outside the timed window, (1) L2 is flushed by writing a
buffer of twice the device's L2 size, (2) a spin kernel (``torch.cuda._sleep``) is queued, then the
start event, ``benchmark_fn``'s kernels and the end event are queued behind it. Because the GPU is still
spinning while the host enqueues the work, the start event fires only when the work is already queued,
so the host's launch latency (10–20 µs on an H100, INTEGRITY #1) stays out of the sample. After the host
returns from ``benchmark_fn`` the start event is queried: if it has already fired, the spin was shorter
than the host's enqueue time, the sample may contain launch gaps, the spin is doubled and the leak is
counted (reported in ``notes``). The device is synchronized after every sample, so nothing escapes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

Fn = Callable[[], Any]

_MAX_SPIN_MS = 50.0


class Clock(Protocol):
    mode: str
    method: str
    l2_flushed: bool
    notes: list[str]

    def first_call(self, fn: Fn) -> float: ...

    def warmup(self, fn: Fn, n: int) -> None: ...

    def sample(self, fn: Fn, n: int) -> list[float]: ...


@dataclass
class CpuClock:
    """perf_counter around each call; synchronizes the GPU first when the variant runs on one."""

    sync: Callable[[], None] | None = None
    mode: str = "cpu"
    l2_flushed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def method(self) -> str:
        extra = ", device synchronized before start and stop" if self.sync else ""
        return f"time.perf_counter around each call{extra}"

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
        for _ in range(n):
            self._one(fn)

    def sample(self, fn: Fn, n: int) -> list[float]:
        return [self._one(fn) for _ in range(n)]


class CudaEventClock:
    """CUDA events with L2 flush and launch latency hidden behind a spin kernel (module docstring)."""

    mode = "cuda_event"

    def __init__(self, device: Any, flush_l2: bool = True) -> None:
        import torch

        self._torch = torch
        self.device = device
        self.l2_flushed = flush_l2
        self.notes: list[str] = []
        self.leaks = 0
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
        # Twice L2 so no line of the previous sample survives (INTEGRITY #2).
        self._flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device) if flush_l2 else None
        self.overhead_bytes = self._flush.numel() * 4 if self._flush is not None else 0
        self._cycles_per_ms = self._calibrate()
        self._spin_ms = 0.05

    @property
    def method(self) -> str:
        flush = "L2 flushed (2x L2 write) before each sample" if self.l2_flushed else "warm L2 (no flush)"
        return f"CUDA events per call, start queued behind a spin kernel to hide launch latency; {flush}"

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
            self._flush.zero_()
        torch.cuda._sleep(int(self._spin_ms * self._cycles_per_ms))
        start.record()
        fn()
        leaked = start.query()  # GPU reached the start before the host finished enqueueing
        end.record()
        torch.cuda.synchronize(self.device)
        if leaked:
            self.leaks += 1
            self._spin_ms = min(self._spin_ms * 2, _MAX_SPIN_MS)
        return float(start.elapsed_time(end))

    def first_call(self, fn: Fn) -> float:
        torch = self._torch
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize(self.device)
        return (time.perf_counter() - t0) * 1e3

    def warmup(self, fn: Fn, n: int) -> None:
        for _ in range(n):  # also grows the spin until it covers the host's enqueue time
            self._one(fn)
        self.leaks = 0

    def sample(self, fn: Fn, n: int) -> list[float]:
        samples = [self._one(fn) for _ in range(n)]
        if self.leaks:
            self.notes.append(
                f"{self.leaks}/{n} samples: the host took longer to enqueue benchmark_fn than the spin "
                f"kernel ran (now {self._spin_ms:.2f} ms); those samples may include launch gaps"
            )
        return samples


def make_clock(mode: str, device: Any, flush_l2: bool = True) -> Clock:
    """The clock for ``mode`` ("auto", "cpu", "cuda_event") on ``device`` (a torch.device)."""
    is_cuda = getattr(device, "type", str(device)) == "cuda"
    if mode == "auto":
        mode = "cuda_event" if is_cuda else "cpu"
    if mode == "cpu":
        if is_cuda:
            import torch

            return CpuClock(sync=lambda: torch.cuda.synchronize(device))
        return CpuClock()
    if mode == "cuda_event":
        if not is_cuda:
            raise ValueError(f"timing_mode='cuda_event' needs a CUDA device, got device={device!s}; use 'cpu'")
        return CudaEventClock(device, flush_l2=flush_l2)
    raise ValueError(f"timing_mode={mode!r} is not one of 'auto', 'cpu', 'cuda_event'")
