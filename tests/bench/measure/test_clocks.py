"""bench/measure/clocks.py, gpu_clocks.py, timer.py: every clock honours one contract; modes are picked by device,
never silently."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from bench.measure.clocks import STABLE_WINDOW, CpuClock, drift_note, warm_up
from bench.measure.gpu_clocks import CudaEventClock, CudaGraphClock, replayed_graph
from bench.measure.stopping import StopRule
from bench.measure.timer import make_clock

CUDA = torch.cuda.is_available()
NO_CUDA = "needs a CUDA device; torch.cuda.is_available() is False on this machine"
gpu = pytest.mark.skipif(not CUDA, reason=NO_CUDA)
RULE = StopRule(noise_target=0.005, min_samples=10, min_seconds=0.0, max_seconds=0.5)

# One contract, every timing mode (STYLE 12): (mode, device), skipped where the device is absent.
MODES = [
    pytest.param("cpu", "cpu", id="cpu"),
    pytest.param("pytorch", "cpu", id="pytorch"),
    pytest.param("cpu", "cuda", id="cpu-on-cuda", marks=gpu),
    pytest.param("cuda_event", "cuda", id="cuda_event", marks=gpu),
    pytest.param("cuda_graph", "cuda", id="cuda_graph", marks=gpu),
    pytest.param("triton", "cuda", id="triton", marks=gpu),
    pytest.param("pytorch", "cuda", id="pytorch-on-cuda", marks=gpu),
]


class Counter:
    def __init__(self, sleep_s: float = 0.0) -> None:
        self.calls = 0
        self.sleep_s = sleep_s

    def __call__(self) -> None:
        self.calls += 1
        if self.sleep_s:
            time.sleep(self.sleep_s)


@pytest.mark.parametrize(("mode", "device"), MODES)
def test_clock_contract_fixed_iterations(mode: str, device: str) -> None:
    clock = make_clock(mode, torch.device(device))
    assert clock.mode == mode and clock.fallback is None
    assert clock.method  # the result says how it was measured
    x = torch.randn(1 << 16, device=device)
    fn = lambda: x.mul_(1.0)  # noqa: E731
    assert clock.first_call(fn) > 0
    clock.warmup(fn, 2)
    m = clock.measure(fn, 5, RULE)
    assert 1 <= len(m.samples_ms) <= 5 if mode == "triton" else len(m.samples_ms) == 5
    assert all(s > 0 for s in m.samples_ms)


def test_cpu_sample_is_one_call_and_includes_host_time() -> None:
    fn = Counter(sleep_s=0.002)
    clock = CpuClock(min_warmup_s=0.0)
    clock.first_call(fn)
    clock.warmup(fn, 2)
    warm = fn.calls - 1
    m = clock.measure(fn, 5, RULE)
    assert fn.calls == 1 + warm + 5 and clock.warmup_done == warm  # one call per sample, nothing hidden
    assert m.stop_reason == "fixed_iterations"
    assert all(2.0 <= s < 1000 for s in m.samples_ms)


def test_cpu_warmup_lasts_at_least_its_floor_and_counts_its_calls(slow_start: Any) -> None:
    """A process whose first 0.1 s runs an op 4x slower (as the H100 host's did): the warm-up outlasts it,
    so the measurement reads the steady rate; the calls made are counted, not the count asked for."""
    start = time.perf_counter()
    op = slow_start(400e-6, 100e-6)
    clock = CpuClock()
    clock.warmup(op, 2)
    assert clock.warmup_done > 2 and time.perf_counter() - start >= clock.min_warmup_s
    m = clock.measure(op, 9, RULE)
    assert max(sorted(m.samples_ms)[:5]) < 0.3  # 0.1 ms, not the slow phase's 0.4 ms


def test_warmup_goes_on_until_calls_are_steady_whatever_the_count() -> None:
    """INTEGRITY #15: an explicit count of 1 does not end the warm-up while calls still change. The issue's
    case: a forked child's first 7 calls took 16 ms, then 0.02 ms; warm-up ends once two windows agree."""
    times = iter([16.0] * 7 + [0.02] * 1000)
    samples, stable = warm_up(lambda: next(times), 1, 0.0, 10.0)
    assert stable and len(samples) > 7 + STABLE_WINDOW  # past the slow calls, and a window after them
    assert next(times) == 0.02 and samples[-STABLE_WINDOW:] == [0.02] * STABLE_WINDOW


def test_a_slow_calls_warmup_window_spans_time_not_five_calls() -> None:
    """A call of 0.6 s is steady once two calls agree (a window spans STABLE_SPAN_S): not ten calls of it. Fast
    calls keep windows of STABLE_WINDOW; a slow start of fast calls is judged by the calls after it."""
    from bench.define.config import BenchmarkConfig, resolve_config
    from bench.measure.clocks import stable_window, warmup_count

    assert [stable_window(ms) for ms in (0.01, 16.0, 100.0, 200.0, 300.0, 600.0, 4500.0)] == [5, 5, 5, 3, 2, 1, 1]
    clock = [0.0]

    def call(ms: float) -> float:
        clock[0] += ms / 1e3
        return ms

    default = resolve_config()
    n = warmup_count(default, 600.0)
    samples, stable = warm_up(lambda: call(600.0), n, 0.05, 30.0, now=lambda: clock[0])
    assert stable and n == 2 and len(samples) == 2  # first call + 2: three calls of 0.6 s, not eleven
    samples, stable = warm_up(lambda: call(0.02), warmup_count(default, 0.02), 0.0, 30.0, now=lambda: clock[0])
    assert stable and len(samples) == 2 * STABLE_WINDOW
    # a count set by the user (or a benchmark's get_config) is kept whatever the call's time
    assert warmup_count(resolve_config(BenchmarkConfig(warmup=5)), 600.0) == 4
    assert warmup_count(resolve_config({"warmup": 3}), 4500.0) == 2
    assert warmup_count(default, 0.5) == default.warmup - 1


def test_a_process_back_to_the_steady_state_it_reached_needs_one_window() -> None:
    """A kept child's later round (bench.isolate.timed): one window within the tolerance of the steady state its
    round 0 reached is steady again; one off it is not, and the warm-up goes on until two windows agree."""
    from bench.define.config import resolve_config
    from bench.measure.clocks import reached, stable_window, warmup_count

    clock = [0.0]

    def call(ms: float) -> float:
        clock[0] += ms / 1e3
        return ms

    default = resolve_config()
    samples, first = warm_up(lambda: call(150.0), warmup_count(default, 150.0), 0.0, 30.0, now=lambda: clock[0])
    w = stable_window(150.0)
    assert first and len(samples) == 2 * w and reached(samples) == 150.0
    n = warmup_count(default, 150.0, again=True)
    samples, stable = warm_up(lambda: call(153.0), n, 0.0, 30.0, now=lambda: clock[0], steady=150.0)
    assert stable and n == w and len(samples) == w  # one window of 0.6 s, not two
    slower = iter([200.0] * w + [180.0] * 100)  # 20 % off round 0's steady state, then settling elsewhere
    samples, stable = warm_up(lambda: call(next(slower)), n, 0.0, 30.0, now=lambda: clock[0], steady=150.0)
    assert stable and len(samples) > w and samples[-1] == 180.0  # two windows that agree, as a fresh warm-up


def test_warmup_that_never_settles_says_so() -> None:
    values = iter(float(1 + (i % 2) * 5) for i in range(10**6))  # alternating 1 and 6 ms
    samples, stable = warm_up(lambda: next(values), 3, 0.0, 0.05)
    assert not stable and len(samples) >= 3


def test_drift_between_early_and_late_samples_is_noted() -> None:
    steady = [1.0 + 0.001 * (i % 3) for i in range(60)]
    assert drift_note(steady) is None
    drifting = [1.0] * 30 + [1.2] * 30
    note = drift_note(drifting)
    assert note is not None and "+20.0 %" in note


def test_cpu_batch_times_back_to_back_calls() -> None:
    fn = Counter(sleep_s=0.0002)
    batch = CpuClock().measure_batch(fn, per_call_ms=0.2)
    assert batch is not None and batch.calls == 5  # ~1 ms of calls per sample
    assert fn.calls == batch.calls * len(batch.samples_ms)
    assert all(0.2 <= s < 50 for s in batch.samples_ms) and "back-to-back" in batch.method


def test_the_batch_takes_a_share_of_the_cold_measurements_time() -> None:
    from bench.measure.clocks import BATCH_FLOOR_S, BATCH_RULE, batch_rule

    assert batch_rule(0.03).max_seconds == BATCH_FLOOR_S  # a trivial call's short cold measurement: the floor
    assert batch_rule(0.4).max_seconds == pytest.approx(0.2)  # half of it
    assert batch_rule(5.0).max_seconds == BATCH_RULE.max_seconds  # never beyond the ceiling
    assert batch_rule(0.0).min_seconds <= batch_rule(0.0).max_seconds
    # A noisy batch (the target out of reach) stops at the share, not at the ceiling.
    noisy = iter([1.0, 3.0] * 10_000)
    fn = Counter(sleep_s=0.0)
    t0 = time.perf_counter()
    batch = CpuClock().measure_batch(lambda: (fn(), time.sleep(next(noisy) * 1e-4)), 0.2, batch_rule(0.1))
    assert batch is not None and batch.stop_reason == "max_time"
    assert time.perf_counter() - t0 < 0.5 * BATCH_RULE.max_seconds


def test_cpu_adaptive_stops_on_noise_target_with_min_samples() -> None:
    fn = Counter(sleep_s=0.001)
    m = CpuClock().measure(fn, None, StopRule(noise_target=0.5, min_samples=12, min_seconds=0.0, max_seconds=5))
    # Checked at 12 (met), confirmed at the next checkpoint, 25 % later: 15 samples.
    assert m.stop_reason == "noise_target" and len(m.samples_ms) == 15 and m.target_met


def test_cpu_clock_syncs_before_start_and_stop() -> None:
    events: list[str] = []
    clock = CpuClock(sync=lambda: events.append("sync"))
    clock.measure(lambda: events.append("call"), 2, RULE)
    assert events == ["sync", "call", "sync"] * 2
    assert "synchronized" in clock.method


def test_auto_on_cpu_is_cpu_clock() -> None:
    clock = make_clock("auto", torch.device("cpu"))
    assert isinstance(clock, CpuClock)
    assert clock.mode == "cpu" and clock.sync is None and clock.l2_flushed is False and clock.fallback is None


@pytest.mark.parametrize("mode", ["cuda_event", "cuda_graph", "triton"])
def test_gpu_modes_on_cpu_fall_back_with_a_reason(mode: str) -> None:
    clock = make_clock(mode, torch.device("cpu"))
    assert clock.mode == "cpu"
    assert clock.fallback is not None and mode in clock.fallback and "CUDA" in clock.fallback


def test_unknown_mode_rejected() -> None:
    with pytest.raises(ValueError, match="'wall'"):
        make_clock("wall", torch.device("cpu"))


@gpu
def test_auto_on_cuda_is_event_clock_with_l2_flush() -> None:
    clock = make_clock("auto", torch.device("cuda", 0))
    assert isinstance(clock, CudaEventClock)
    assert clock.l2_flushed and "L2 flushed" in clock.method
    warm = make_clock("auto", torch.device("cuda", 0), flush_l2=False)
    assert not warm.l2_flushed and "warm" in warm.method


@gpu
@pytest.mark.parametrize("cls", [CudaEventClock, CudaGraphClock])
def test_event_clocks_count_device_time(cls: type) -> None:
    clock = cls(torch.device("cuda", 0))
    spin_cycles = int(clock._cycles_per_ms * 2.0)  # a kernel that runs ~2 ms on the device
    fn = lambda: torch.cuda._sleep(spin_cycles)  # noqa: E731
    clock.warmup(fn, 3)
    m = clock.measure(fn, 5, RULE)
    # The host returns from fn at once; the samples must still cover the 2 ms kernel.
    assert all(1.5 <= s <= 20.0 for s in m.samples_ms), m.samples_ms
    assert clock.fallback is None


@gpu
@pytest.mark.parametrize("cls", [CudaEventClock, CudaGraphClock])
def test_a_captured_call_is_sampled_behind_a_spin_fitted_to_its_replay(cls: type) -> None:
    """Eager warm-up calls of 512 kernels grow the spin kernel until it covers their enqueueing (milliseconds); a
    graph's replay is one launch, so its samples wait behind a spin fitted again to the replay, not the eager one."""
    x = torch.zeros(1, device="cuda")

    def fn() -> None:
        for _ in range(512):
            x.add_(1.0)

    eager = CudaEventClock(torch.device("cuda", 0), flush_l2=False)  # no capture: its spin stays as warm-up grew it
    eager.warmup(fn, 5)
    clock = cls(torch.device("cuda", 0))
    clock.warmup(fn, 5)
    assert eager._spin_ms >= 0.8 and clock._spin_ms <= eager._spin_ms / 4, (eager._spin_ms, clock._spin_ms)


def test_the_spin_is_fitted_again_from_its_start_by_replays_that_stop_outrunning_it() -> None:
    """``_fit_spin``: from the start value, doubled by each replay the host outran, until FIT_REPLAYS in a row did
    not."""
    from bench.measure.gpu_clocks import FIT_REPLAYS

    clock = object.__new__(CudaEventClock)
    clock._spin_start, clock._spin_ms, clock.leaks, clock.side_stream = 0.05, 50.0, 0, 0
    replays = []

    def replay() -> None:  # a replay's enqueueing takes 0.3 ms: a spin under it is outrun and doubles (as _span does)
        replays.append(clock._spin_ms)
        if clock._spin_ms < 0.3:
            clock.leaks += 1
            clock._spin_ms *= 2

    clock._fit_spin(replay)
    assert clock._spin_ms == pytest.approx(0.4) and replays == pytest.approx([0.05, 0.1, 0.2] + [0.4] * FIT_REPLAYS)
    assert clock.leaks == 0  # the fitting replays' counts are not the measurement's


@gpu
def test_sample_gap_idles_after_each_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """sample_gap=k: after every sample the host sleeps k x the span the events measured."""
    from bench.measure.guard import BOUND

    slept: list[float] = []
    monkeypatch.setattr(BOUND, "sleep", lambda s: slept.append(s))
    x = torch.randn(2**22, device="cuda")
    clock = make_clock("cuda_event", torch.device("cuda", 0), sample_gap=2.0)
    m = clock.measure(lambda: x.mul_(1.0), 12, RULE)
    assert len(slept) == len(m.samples_ms) == 12
    assert slept == pytest.approx([2.0 * t / 1e3 for t in m.samples_ms])  # one call per sample here
    assert "idle 2x" in clock.method


def test_sample_gap_is_validated() -> None:
    from bench.define.config import BenchmarkConfig

    with pytest.raises(ValueError, match="sample_gap"):
        BenchmarkConfig(sample_gap=-1.0)
    assert make_clock("cuda_event", torch.device("cpu"), sample_gap=1.0).mode == "cpu"  # falls back, no error


@gpu
def test_side_stream_work_makes_the_measurement_invalid() -> None:
    side = torch.cuda.Stream()
    clock = CudaEventClock(torch.device("cuda", 0))
    cycles = int(clock._cycles_per_ms * 1.0)

    def fn() -> None:
        with torch.cuda.stream(side):  # 1 ms of work the current stream's events never see
            torch.cuda._sleep(cycles)

    clock.warmup(fn, 2)
    m = clock.measure(fn, 5, RULE)
    assert clock.invalid and "unjoined side stream" in clock.invalid, (clock.notes, m.samples_ms)


@gpu
def test_joined_side_stream_is_timed_with_its_work() -> None:
    side = torch.cuda.Stream()
    clock = CudaEventClock(torch.device("cuda", 0))
    cycles = int(clock._cycles_per_ms * 1.0)

    def fn() -> None:
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
        main.wait_stream(side)

    clock.warmup(fn, 2)
    m = clock.measure(fn, 5, RULE)
    assert clock.invalid is None and all(s >= 0.9 for s in m.samples_ms), m.samples_ms


@gpu
def test_unforked_side_stream_is_invalid_though_joined() -> None:
    """A side stream that does not wait for the current stream starts its work during the spin kernel, before
    the start event: joined back or not, the events would time none of it."""
    side = torch.cuda.Stream()
    clock = CudaEventClock(torch.device("cuda", 0))
    cycles = int(clock._cycles_per_ms * 0.5)

    def fn() -> None:
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
        torch.cuda.current_stream().wait_stream(side)

    clock.warmup(fn, 2)
    assert clock.invalid and "without waiting for the current stream" in clock.invalid, clock.notes


@gpu
def test_tiny_kernel_cold_and_batch() -> None:
    """INTEGRITY #1 and #14: a 1024-element add is ~1 µs on the device; one cold call costs the device a few
    µs more (no launch latency: that would be 14-22 µs), back to back in a graph ~1 µs each."""
    a = torch.arange(1024, device="cuda", dtype=torch.float32)
    b, out = a.flip(0).contiguous(), torch.empty_like(a)
    clock = CudaEventClock(torch.device("cuda", 0))
    fn = lambda: torch.add(a, b, out=out)  # noqa: E731
    clock.warmup(fn, 10)
    m = clock.measure(fn, 50, RULE)
    cold = sorted(m.samples_ms)[25]
    assert cold < 0.008, f"cold median {cold * 1e3:.1f} us: launch latency is inside the sample"
    batch = clock.measure_batch(fn, cold)
    assert batch is not None and batch.calls > 100 and "CUDA-graph replay" in batch.method
    assert sorted(batch.samples_ms)[len(batch.samples_ms) // 2] < cold
    assert torch.equal(out, a + b)


@gpu
def test_graph_replays_time_a_batch_as_one_graph_of_every_call_does() -> None:
    """A batch of a tiny kernel is 4,000 calls; replays of a 500-call graph back to back (an eighth of the capture)
    read the same per call as one graph of all 4,000: each replay's start on the device stays inside the figure."""
    import statistics

    a = torch.arange(1024, device="cuda", dtype=torch.float32)
    b, out = a.flip(0).contiguous(), torch.empty_like(a)
    device = torch.device("cuda", 0)
    clock = CudaEventClock(device)
    fn = lambda: torch.add(a, b, out=out)  # noqa: E731
    clock.warmup(fn, 10)
    whole, n_whole, _ = replayed_graph(fn, 4000, device, captured=4000)
    parts, n_parts, how = replayed_graph(fn, 4000, device)
    assert n_whole == n_parts == 4000 and how.startswith("8 back-to-back CUDA-graph replays of 500 calls"), how
    one, many = [], []
    for _ in range(3):  # the spin grows to cover enqueueing eight replays
        clock._span(whole, flush=False), clock._span(parts, flush=False)
    for _ in range(15):
        one.append(clock._span(whole, flush=False) / n_whole)
        many.append(clock._span(parts, flush=False) / n_parts)
    ratio = statistics.median(many) / statistics.median(one)
    print(f"per call: one graph {1e3 * statistics.median(one):.3f} us, replays {1e3 * statistics.median(many):.3f} us")
    assert 0.97 < ratio < 1.03, (ratio, one, many)


# Last on purpose: a failed capture leaves torch's CUDA RNG in capture state for this process (the
# harness runs every variant in its own process, so only this test process is affected).
@gpu
def test_cuda_graph_falls_back_when_capture_is_impossible() -> None:
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    fn = lambda: float(x.sum().item())  # noqa: E731  (a host sync cannot be captured)
    clock = CudaGraphClock(torch.device("cuda", 0))
    clock.warmup(fn, 1)
    assert clock.mode == "cuda_event" and clock.fallback and "capture failed" in clock.fallback
    assert len(clock.measure(fn, 3, RULE).samples_ms) == 3


def test_time_callable_is_the_harness_clock_for_code_outside_a_chapter() -> None:
    """bench.measure.time_callable (the kernel sweeps' timing): the config's clock, its first call apart, a
    warm-up to a steady state, then the fixed number of samples; their statistics."""
    from bench.define.config import resolve_config
    from bench.measure import time_callable

    calls: list[int] = []
    config = resolve_config({"device": "cpu", "iterations": 7, "warmup": 2, "min_warmup_seconds": 0.0})
    stats = time_callable(lambda: calls.append(1), config, torch.device("cpu"))
    assert stats.n == 7 and stats.min_ms >= 0.0 and stats.median_ms <= stats.max_ms
    assert len(calls) >= 1 + 2 * STABLE_WINDOW + 7  # first call, a steady warm-up (two windows), the samples


def test_time_alone_is_the_least_sample_of_the_harness_clock() -> None:
    """bench.time_alone (a part of a call timed in setup, e.g. a stated ceiling): the run's clock (the host's, for a
    variant on the CPU), a warm-up to a steady state, then ``tries`` samples; the least of them."""
    from bench import time_alone
    from bench.define import context as run_context
    from bench.define.config import resolve_config

    calls: list[float] = []

    def fn() -> None:  # 2, 6, 6, 2, 6, 6, ... ms: any three samples in a row hold one of 2 ms
        calls.append(time.perf_counter())
        time.sleep(0.002 if len(calls) % 3 == 0 else 0.006)

    before = run_context._current
    run_context.set_context(run_context.make_context(resolve_config({"device": "cpu"})))
    try:
        ms = time_alone(fn, tries=3)
    finally:
        run_context.set_context(before)
    assert 1.8 <= ms < 4.0, ms
    assert len(calls) >= 1 + 2 * STABLE_WINDOW + 3  # first call, a steady warm-up, three samples
    with pytest.raises(ValueError, match="tries=0"):
        time_alone(fn, tries=0)


def test_time_alone_chases_a_steady_state_for_two_seconds_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    """It runs inside a set-up's time limit (30 s by default), perhaps once per kernel of a stated ceiling."""
    from bench import time_alone
    from bench.measure import timer

    made: list[Any] = []
    real = timer.clock_for
    monkeypatch.setattr(timer, "clock_for", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    time_alone(lambda: None, tries=1)
    assert made and made[0].max_warmup_s == 2.0


@gpu
def test_time_alone_counts_device_time_not_the_launch() -> None:
    """On a GPU: a ~2 ms kernel reads ~2 ms; a call whose host work (~5 ms of Python before a ~0.1 ms kernel) hides
    behind the spin kernel reads the kernel, not the host."""
    from bench import time_alone

    cycles_per_ms = CudaEventClock(torch.device("cuda", 0))._cycles_per_ms
    assert 1.5 <= time_alone(lambda: torch.cuda._sleep(int(2 * cycles_per_ms))) <= 3.0

    def slow_host() -> None:
        time.sleep(0.005)
        torch.cuda._sleep(int(0.1 * cycles_per_ms))

    assert time_alone(slow_host) < 1.0
