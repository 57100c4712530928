"""The clock of a token-generating benchmark (bench.measure.generation): one sample is one generation of the
request set, each engine step timed (CUDA events around the step and a device synchronize after it on a GPU,
``perf_counter`` with the device synchronized on either side otherwise); TTFT, TPOT, ITL and throughput come
from the steps' times. Its surface is that of bench.measure.clocks's clocks (``first_call``, ``warmup``,
``measure``), so the child's stages time it like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.measure.generation import (
    RequestSpec,
    SampleRecord,
    StepTimer,
    arrival_pattern,
    check_greedy_output,
    is_generating,
    read_requests,
    run_generation,
    speedup_metric,
    summarize,
)
from bench.measure.guard import has_nan
from bench.measure.outputs import writable
from bench.measure.stopping import Measurement, StopRule, sample_until

__all__ = ["GenerationClock", "RequestSpec", "generation_clock"]


@dataclass
class GenerationClock:
    """The harness's clock for a token-generating benchmark (the surface of bench.measure.clocks's clocks:
    ``first_call``, ``warmup``, ``measure``); one sample = one generation of the request set, its span."""

    obj: Any
    device: Any
    events: bool  # CUDA events per step (else perf_counter with device syncs)
    min_warmup_s: float = 0.3
    fallback: str | None = None
    notes: list[str] = field(default_factory=list)
    l2_flushed: bool = False
    warmup_done: int = 0
    stable: bool | None = None  # a generation's span is not judged for a steady state (bench.measure.clocks's is)
    invalid: str | None = None  # the device-wide sync after each step leaves no side-stream work untimed
    records: list[SampleRecord] = field(default_factory=list)
    unwritten: int = 0  # measured generations that left the output's poison in place
    # BenchmarkConfig.verify: with "greedy_tokens" the output is [tokens, runner_up, gap, offsets], the offsets
    # checked against the request set here and never poisoned (they describe the layout; no step writes them).
    verify: str = "exact"
    # A later round of a process whose round 0 warmed up (a kept child: bench.isolate.timed._resumed): its warm-up is
    # the first call alone, ``min_warmup_s`` counted from that call's start (``warmup_count``, ``warmup``).
    again: bool = False
    first_t0: float | None = None  # when the first call began (perf_counter)
    # The host CPU's speed reference (bench.measure.hostspeed) read right after each measured generation, outside its
    # span: a launch-bound generation runs at the host CPU's speed, which swings within a round on a VM's host.
    host_refs_ms: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.requests = read_requests(self.obj)
        self.metric = speedup_metric(self.obj)
        if self.verify == "greedy_tokens":
            check_greedy_output(self._outputs(), self.requests)
        self.mode = "cuda_event" if self.events else "cpu"
        self._timer = self._event_timer() if self.events else self._cpu_timer()

    @property
    def method(self) -> str:
        how = (
            "CUDA events around each engine step, device synchronized after it"
            if self.events
            else "time.perf_counter around each engine step, device synchronized before and after"
        )
        return (
            f"token generation (bench.measure.generation): {how}; one sample = one generation of "
            f"{arrival_pattern(self.requests)}, its span on the steps' time axis; L2 not flushed between steps"
        )

    def _sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def _cpu_timer(self) -> StepTimer:
        def timer(call: Callable[[], Any]) -> tuple[Any, float]:
            self._sync()
            t0 = time.perf_counter()
            out = call()
            self._sync()
            return out, (time.perf_counter() - t0) * 1e3

        return timer

    def _event_timer(self) -> StepTimer:
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def timer(call: Callable[[], Any]) -> tuple[Any, float]:
            start.record()
            out = call()
            end.record()
            torch.cuda.synchronize(self.device)  # device-wide: the step's work on any stream is over
            return out, float(start.elapsed_time(end))

        return timer

    def _outputs(self) -> list[Any]:
        get = getattr(self.obj, "get_output", None)
        out = get() if callable(get) else None
        if out is None:
            return []
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def _written(self) -> list[Any]:
        """The outputs every generation's steps must write: all of them, a greedy_tokens output's offsets aside."""
        out = self._outputs()
        return [t for i, t in enumerate(out) if i % 4 != 3] if self.verify == "greedy_tokens" else out

    def _poison(self) -> None:
        """INTEGRITY #6 for tokens: every output entry must be written by this generation's steps."""
        for t in self._written():
            with writable(t):
                if t.is_floating_point() or t.is_complex():
                    t.fill_(float("nan"))
                elif t.dtype.is_signed:
                    t.fill_(-1)

    def _poisoned(self) -> bool:
        for t in self._written():
            if t.is_floating_point() or t.is_complex():
                if has_nan(t):
                    return True
            elif t.dtype.is_signed and bool((t == -1).any()):
                return True
        return False

    def _generate(self) -> SampleRecord:
        self.obj.start_generation()
        self._poison()
        self._sync()
        return run_generation(self.obj, self.requests, self._timer)

    def first_call(self, fn: Callable[[], Any]) -> float:
        """The first generation's wall time (compilation, graph capture and allocator warm-up included)."""
        self._sync()
        t0 = self.first_t0 = time.perf_counter()
        self._generate()
        self._sync()
        return (time.perf_counter() - t0) * 1e3

    def warmup_count(self, config: Any) -> int:
        """Generations after the first call, at least: ``config.warmup`` - 1; none where the clock times a later round
        of a process that warmed up before (``again``). Round 0 of that process paid every one-time cost (allocator,
        cuBLAS heuristics, graph capture); what parking changes is the GPU's idle time, and the round's first call,
        a whole generation, untimed and recorded as ``first_call_ms``, brings the clocks back."""
        return 0 if self.again else max(config.warmup - 1, 0)

    def warmup(self, fn: Callable[[], Any], n: int) -> None:
        """``n`` generations, and more until ``min_warmup_s`` has passed (a fresh process's host is slow
        at first, and every step's host work is in the sample): from the warm-up's start, or from the first
        call's where the process warmed up before (``again``: that call is the round's warm-up)."""
        t0 = self.first_t0 if self.again and self.first_t0 is not None else time.perf_counter()
        t_end = t0 + self.min_warmup_s
        done = 0
        while done < n or time.perf_counter() < t_end:
            self._generate()
            done += 1
        self.warmup_done = done

    def eager(self, fn: Callable[[], Any]) -> float:
        """One generation's span (ms): the recheck's call from the set-up state."""
        return self._generate().span_ms

    def measure_batch(self, fn: Callable[[], Any], median_ms: float, rule: Any = None) -> None:
        """No batch time: a generation's steps already run back to back."""
        return None

    def measure(self, fn: Callable[[], Any], iterations: int | None, rule: StopRule) -> Measurement:
        from bench.measure.hostspeed import reference_ms

        def one() -> float:
            record = self._generate()
            self.unwritten += self._poisoned()
            self.records.append(record)
            self.host_refs_ms.append(reference_ms())
            return record.span_ms

        return sample_until(one, iterations, rule)

    def result(self) -> dict[str, Any]:
        """The measured generations, summarised (the ``generation`` message: bench.define.result.Generation)."""
        return summarize(self.records, self.requests, self.metric)

    def wrote_output(self) -> bool | None:
        """False when a measured generation left part of the output unwritten; None without an output."""
        if not self._outputs():
            return None
        return self.unwritten == 0


def generation_clock(obj: Any, config: Any, device: Any, again: bool = False) -> GenerationClock | None:
    """The clock for ``obj`` when it generates tokens (else None: the harness's usual clock); ``again``: it times
    a later round of a process that warmed up before (``GenerationClock.again``).

    ``timing_mode`` "auto" or "cuda_event" on a GPU: CUDA events per step; "cpu": perf_counter per step;
    any other mode times single calls and does not apply, so events are used and the fallback says why.
    """
    if not is_generating(obj):
        return None
    mode = getattr(config, "timing_mode", "auto")
    cuda = device.type == "cuda"
    floor = getattr(config, "min_warmup_seconds", None)
    clock = GenerationClock(
        obj, device, events=cuda and mode != "cpu", min_warmup_s=0.3 if floor is None else floor,
        verify=getattr(config, "verify", "exact"), again=again,
    )  # fmt: skip
    if mode not in ("auto", "cpu", "cuda_event"):
        clock.fallback = f"timing_mode {mode!r} times single calls; a generation is timed step by step ({clock.mode})"
    return clock
