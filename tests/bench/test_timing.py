"""bench/timing.py: every clock honours one contract; modes are picked by device, never silently."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from bench.stopping import StopRule
from bench.timing import CpuClock, CudaEventClock, CudaGraphClock, make_clock

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
    m = clock.measure(fn, 5, RULE)
    assert fn.calls == 1 + 2 + 5 and clock.warmup_done == 2  # one call per sample, nothing hidden
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
    assert "warm-up at least 0.3 s" in clock.method


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
def test_sample_gap_idles_after_each_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """sample_gap=k: after every sample the host sleeps k x the span the events measured."""
    import bench.timing as timing

    slept: list[float] = []
    monkeypatch.setattr(timing.time, "sleep", lambda s: slept.append(s))
    x = torch.randn(2**22, device="cuda")
    clock = make_clock("cuda_event", torch.device("cuda", 0), sample_gap=2.0)
    m = clock.measure(lambda: x.mul_(1.0), 12, RULE)
    assert len(slept) == len(m.samples_ms) == 12
    assert slept == pytest.approx([2.0 * t / 1e3 for t in m.samples_ms])  # one call per sample here
    assert "idle 2x" in clock.method


def test_batch_decision_ignores_warmup_samples_the_host_outran(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch-bound call is batched by its fastest warm-up sample: samples with a launch gap inside only
    read slower (H100: a median of such samples read > 5 us for a 1 us add, which then went unbatched)."""
    clock = CudaEventClock.__new__(CudaEventClock)  # the decision only; no device needed
    clock._auto_batch, clock.calls_per_sample, clock.launch_batching = True, 1, "eager"
    clock._batch, clock.leaks, clock.side_stream = None, 0, 0
    samples = iter([0.009, 0.0036, 0.008, 0.007] + [0.2] * 12)  # ms: three warm-up samples with gaps
    monkeypatch.setattr(clock, "_one", lambda fn: next(samples))
    clock.warmup(lambda: None, 4)
    assert clock.calls_per_sample == 56  # ceil(0.2 ms / 3.6 us)


def test_sample_gap_is_validated() -> None:
    from bench.config import BenchmarkConfig

    with pytest.raises(ValueError, match="sample_gap"):
        BenchmarkConfig(sample_gap=-1.0)
    assert make_clock("cuda_event", torch.device("cpu"), sample_gap=1.0).mode == "cpu"  # falls back, no error


@gpu
def test_side_stream_work_is_flagged() -> None:
    side = torch.cuda.Stream()
    clock = CudaEventClock(torch.device("cuda", 0), calls_per_sample=1)
    cycles = int(clock._cycles_per_ms * 1.0)

    def fn() -> None:
        with torch.cuda.stream(side):  # 1 ms of work the current stream's events never see
            torch.cuda._sleep(cycles)

    clock.warmup(fn, 2)
    m = clock.measure(fn, 5, RULE)
    assert any("side streams" in n for n in clock.notes), (clock.notes, m.samples_ms)


@gpu
def test_tiny_kernel_sample_is_device_time_not_launch_time() -> None:
    """INTEGRITY #1: a 1024-element add is ~1-2 us on the device, 14-22 us if launch time leaks in."""
    a = torch.arange(1024, device="cuda", dtype=torch.float32)
    b, out = a.flip(0).contiguous(), torch.empty_like(a)
    clock = CudaEventClock(torch.device("cuda", 0))
    fn = lambda: torch.add(a, b, out=out)  # noqa: E731
    clock.warmup(fn, 10)
    m = clock.measure(fn, 50, RULE)
    median = sorted(m.samples_ms)[25]
    assert clock.calls_per_sample > 1  # launch-bound: batched back-to-back calls
    assert median < 0.004, f"median {median * 1e3:.1f} us: launch latency is inside the sample"


@gpu
@pytest.mark.parametrize("cls", [CudaEventClock, CudaGraphClock])
def test_launch_bound_batch_is_one_graph_replay(cls: type) -> None:
    """Eager back-to-back launches cost the device ~2.2 us each on an H100; inside one graph ~1.0 us."""
    a = torch.arange(1024, device="cuda", dtype=torch.float32)
    b, out = a.flip(0).contiguous(), torch.empty_like(a)
    fn = lambda: torch.add(a, b, out=out)  # noqa: E731
    graphed, eager = cls(torch.device("cuda", 0)), cls(torch.device("cuda", 0), launch_batching="eager")
    medians = []
    for clock in (graphed, eager):
        clock.warmup(fn, 10)
        medians.append(sorted(clock.measure(fn, 51, RULE).samples_ms)[25])
    assert graphed._batch is not None and eager._batch is None
    assert "CUDA-graph replay of" in graphed.method and any("one CUDA-graph replay" in n for n in graphed.notes)
    assert medians[0] < medians[1], f"graph batch {medians[0] * 1e3:.2f} us vs eager {medians[1] * 1e3:.2f} us"
    assert torch.equal(out, a + b)


def test_launch_batching_value_is_checked() -> None:
    with pytest.raises(ValueError, match="launch_batching='bogus' is not one of graph, eager"):
        CudaEventClock(torch.device("cuda", 0), launch_batching="bogus")


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


class _ModelClock(CudaEventClock):
    """A cuda_event clock whose samples follow a model instead of a GPU: each sample costs the host
    ``overhead_ms`` once plus ``call_ms`` per call (runs on the CPU, for the batching decision alone)."""

    def __init__(self, overhead_ms: float, call_ms: float, leaky_batches: int = 0) -> None:  # no CUDA set-up
        self.overhead_ms, self.call_ms, self.leaky_batches = overhead_ms, call_ms, leaky_batches
        self.launch_batching, self._batch, self._auto_batch, self.calls_per_sample = "graph", None, True, 1
        self.notes, self.leaks, self.side_stream, self.tails_ms, self.idle_sync_ms = [], 0, 0, [], []

    def _one(self, fn: Any) -> float:
        if self.calls_per_sample > 1 and self.leaky_batches > 0:  # the host outran the spin: its launch rate
            self.leaky_batches -= 1
            self.leaks += 1
            return 0.005
        return (self.overhead_ms + self.calls_per_sample * self.call_ms) / self.calls_per_sample

    def _batch_in_graph(self, fn: Any) -> None:
        self._batch = fn


@pytest.mark.parametrize(
    ("overhead_us", "call_us", "batched"),
    [
        (4.2, 1.0, True),  # the H200 x 2 host's 1 µs add: a 5.2 µs sample, over the fixed 5 µs line
        (2.5, 1.0, True),  # the H100's: 3.5 µs, under it
        (2.5, 20.0, False),  # a 20 µs kernel: the sample is 12 % overhead, timed per call as before
        (2.5, 43.0, False),  # the selfcheck's 64 MiB op
        (2.5, 60.0, False),  # beyond PROBE_BELOW_MS: not probed
    ],
)
def test_a_call_whose_sample_is_mostly_per_sample_overhead_is_batched(
    overhead_us: float, call_us: float, batched: bool
) -> None:
    clock = _ModelClock(overhead_us / 1e3, call_us / 1e3)
    clock.warmup(lambda: None, 4)
    assert (clock.calls_per_sample > 1) == batched, (clock.calls_per_sample, clock.notes)
    assert any("launch-bound" in n for n in clock.notes) == (batched and overhead_us + call_us >= 5.0)


def test_the_batching_probe_ignores_batches_the_host_outran() -> None:
    """The probe's first back-to-back batches can leak (the spin too short for 40 launches): they time the
    host's ~5 µs per launch, not the device's 1 µs call, and would have kept the add unbatched (H200 x 2)."""
    clock = _ModelClock(4.2e-3, 1.0e-3, leaky_batches=3)
    clock.warmup(lambda: None, 4)
    assert clock.calls_per_sample > 1 and any("launch-bound" in n for n in clock.notes), clock.notes
