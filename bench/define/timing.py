"""The numbers a variant's timed stages measured: cold samples, back-to-back batches, energy per call, memory.

Each keeps its raw samples; statistics are derived from them (bench.measure.stats.summarize), never sent in their
place. ``bench.define.result.VariantResult`` holds one of each.
"""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import BaseModel, Field


class TimingStats(BaseModel):
    """Derived from raw samples; see bench.measure.stats.summarize."""

    n: int
    mean_ms: float
    median_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    cv: float  # std / mean
    percentiles_ms: dict[str, float]  # {"p50": ..., "p90": ...}


class Timing(BaseModel):
    mode: str  # the clock used: cpu, cuda_event, cuda_graph, triton, pytorch
    requested_mode: str | None = None  # what the config asked for ("auto" included)
    fallback: str | None = None  # why the requested mode could not be used
    method: str  # one line on how samples were taken (clock, L2 flush, launch-gap hiding)
    samples_ms: list[float]
    stats: TimingStats
    first_call_ms: float | None = None  # first warm-up call alone (compile/JIT/autotune included)
    warmup_calls: int = 0
    warmup_stable: bool | None = None  # warm-up reached a steady state (bench.measure.clocks.warm_up)
    warmup_steady_ms: float | None = None  # the steady state it reached, on the warm-up's clock (clocks.reached)
    l2_flushed: bool = False
    notes: list[str] = Field(default_factory=list)  # anything that weakens the number
    stop_reason: str | None = None  # fixed_iterations, noise_target, max_time, or the timer's own
    invalid: str | None = None  # why these samples cannot stand (work on an unjoined side stream)
    noise: float | None = None  # relative standard error of the median reached
    noise_target: float | None = None
    target_met: bool | None = None  # None: no target (fixed iterations, external timers)
    machine_before: dict[str, Any] = Field(default_factory=dict)  # NVML state (bench.measure.machine)
    machine_after: dict[str, Any] = Field(default_factory=dict)
    machine_flags: list[str] = Field(default_factory=list)  # throttled / shared GPU
    # world_size > 1: every rank's own time of each sample (rank by rank); samples_ms holds the slowest rank's
    rank_samples_ms: list[list[float]] | None = None
    # Measured in rounds (bench.isolate.rounds): how many of samples_ms each round's child took, in order
    rounds: list[int] | None = None
    # Intra-op threads of a host-clocked measurement (torch.get_num_threads()), per round when in rounds
    threads: list[int] | None = None
    # The host CPU's speed reference (bench.measure.hostspeed), ms, read right before and right after the
    # measurement: [before, after], one per round when in rounds (a round without readings: [])
    host_ref_ms: list[list[float]] = Field(default_factory=list)
    # A token-generating variant's: the reference read right after each measured generation, one per sample
    host_ref_during_ms: list[float] | None = None
    round_warmup_calls: list[int] | None = None  # in rounds: each round's warm-up calls (warmup_calls: round 0's)


class BatchTiming(BaseModel):
    """Back-to-back calls (nvbench's batch GPU time): warm L2, per-call times."""

    samples_ms: list[float]  # each: one batch's span / its calls
    stats: TimingStats
    calls: int  # calls per batch
    method: str
    rounds: list[int] | None = None  # as Timing.rounds
    stop_reason: str | None = None
    noise: float | None = None
    notes: list[str] = Field(default_factory=list)


class EnergyUse(BaseModel):
    """The GPU board's energy per call over a window of back-to-back calls (bench.measure.energy), or why none."""

    samples_mj: list[float] = Field(default_factory=list)  # one per counter segment: its power x time per call
    power_w: list[float] = Field(default_factory=list)  # each segment's power
    per_call_ms: float | None = None  # the window's time per call
    calls: int = 0
    window_s: float | None = None
    step_ms: float | None = None  # the counter's median step period, as observed
    method: str | None = None
    notes: list[str] = Field(default_factory=list)
    unavailable: str | None = None  # why nothing was measured (no NVML, a CPU, several ranks, a coarse counter)

    @property
    def median_mj(self) -> float | None:
        return statistics.median(self.samples_mj) if self.samples_mj else None


class Memory(BaseModel):
    """A variant's memory, read after its measurement (bench.isolate.timed), and a memory pair's readings."""

    device: str
    peak_mb: float  # CUDA max allocated on GPU; peak RSS of the child on CPU
    allocated_mb: float | None = None
    reserved_mb: float | None = None
    rss_peak_mb: float | None = None
    harness_mb: float | None = None  # harness buffers (L2 flush) excluded from peak/allocated
    # The benchmark's speedup_metric() when it names memory ("peak_memory", "peak_reserved"; bench.measure.memory)
    metric: str | None = None
    # Then one reading of it per call (MiB), each from reset peak statistics: on a GPU only (none on a CPU)
    call_peaks_mb: list[float] = Field(default_factory=list)
    # A variant of several ranks: every size above and each call peak is the max over its ranks (each rank reads
    # its own allocator; bench.measure.memory.over_ranks); each rank's own peak_mb and call peaks, in rank order,
    # and the rank that held the most (of peak_mb; of the call peaks' median)
    rank_peak_mb: list[float] = Field(default_factory=list)
    peak_rank: int | None = None
    rank_call_peaks_mb: list[list[float]] = Field(default_factory=list)
    call_peak_rank: int | None = None
