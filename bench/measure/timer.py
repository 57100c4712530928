"""Which clock times what: the one mapping from configuration to clock (``make_clock``, ``clock_for``), for
variants, the selfcheck and the kernel sweeps; and ``time_callable``, the harness's clock for code outside a
chapter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.measure.clocks import MODES, Clock, CpuClock, Fn, PytorchClock, TritonClock
from bench.measure.gpu_clocks import CudaEventClock, CudaGraphClock
from bench.measure.guard import BOUND
from bench.measure.stats import summarize
from bench.measure.stopping import rule_for

if TYPE_CHECKING:
    from bench.define.config import BenchmarkConfig
    from bench.define.timing import TimingStats


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
    world_size: int = 1,
) -> Clock:
    """The clock for ``mode`` on ``device`` (a torch.device); GPU-only modes fall back on CPU, with reason.
    ``min_warmup_s``: the shortest warm-up (None: by clock); ``sample_gap``: idle after each GPU-event
    sample, a multiple of its span; ``max_warmup_s``: the longest warm-up chasing a steady state;
    ``world_size`` > 1: this rank's clock among that many (bench.measure.collective)."""
    if mode not in MODES:
        raise ValueError(f"timing_mode={mode!r} is not one of {', '.join(MODES)}")
    is_cuda = getattr(device, "type", str(device)) == "cuda"
    host_min = HOST_MIN_WARMUP_S if min_warmup_s is None else min_warmup_s
    gpu_min = GPU_MIN_WARMUP_S if min_warmup_s is None else min_warmup_s
    if world_size > 1:
        from bench.measure.collective import ranks_clock

        return ranks_clock(mode, device, world_size, flush_l2, spin_ms, sample_gap, host_min, gpu_min, max_warmup_s)
    if mode == "auto":
        mode = "cuda_event" if is_cuda else "cpu"
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
        world_size=config.world_size,
    )


def time_callable(fn: Fn, config: BenchmarkConfig, device: Any) -> TimingStats:
    """``fn`` timed in this process with the harness's clock, for code outside a chapter (the kernel sweeps):
    ``config``'s clock on ``device``, the first call apart, a warm-up of at least ``config.warmup`` calls more
    to a steady state, then samples until ``config``'s stop rule; their statistics. No isolation: a chapter's
    variant runs in a child of its own instead (bench.isolate)."""
    clock = clock_for(config, device)
    clock.first_call(fn)
    clock.warmup(fn, config.warmup)
    m = clock.measure(fn, config.iterations, rule_for(config))
    return summarize(m.samples_ms)


def time_alone(fn: Fn, tries: int = 3) -> float:
    """The least of ``tries`` samples of ``fn`` (ms) on the run's device, taken as the harness takes a variant's
    primary time: for a part of a call timed on its own in ``setup()``, such as the ``ceiling_ms`` a benchmark
    states in ``get_work()``, so that the ceiling and the median it is compared with come from one clock. On a GPU
    each sample is one call with the L2 flushed and the launch hidden behind a spin kernel (a CUDA-graph
    difference where the call can be captured), after a warm-up to a steady state (chased for 2 s at most: it runs
    inside the set-up's time limit); on a CPU, the host's clock.
    Raises ``ValueError`` when the clock cannot trust the samples (work left on an unjoined side stream)."""
    from bench.define.config import BenchmarkConfig
    from bench.define.context import context

    if tries < 1:
        raise ValueError(f"tries={tries!r}: time_alone takes at least 1 sample")
    config = BenchmarkConfig(iterations=tries, warmup=1, warmup_timeout_seconds=4.0)  # chases a steady state <= 2 s
    clock = clock_for(config, context().device)
    clock.first_call(fn)
    clock.warmup(fn, config.warmup)
    samples = clock.measure(fn, tries, rule_for(config)).samples_ms
    if clock.invalid:
        raise ValueError(f"time_alone: {clock.invalid}")
    return min(samples)
