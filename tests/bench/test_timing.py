"""bench/timing.py: every clock honours one contract; modes are picked by device, never silently."""

from __future__ import annotations

import time

import pytest
import torch

from bench.timing import CpuClock, CudaEventClock, make_clock

CUDA = torch.cuda.is_available()
NO_CUDA = "needs a CUDA device; torch.cuda.is_available() is False on this machine"

# One contract, every timing mode (STYLE 12): (mode, device), skipped where the device is absent.
MODES = [
    pytest.param("cpu", "cpu", id="cpu"),
    pytest.param("cpu", "cuda", id="cpu-on-cuda", marks=pytest.mark.skipif(not CUDA, reason=NO_CUDA)),
    pytest.param("cuda_event", "cuda", id="cuda_event", marks=pytest.mark.skipif(not CUDA, reason=NO_CUDA)),
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
def test_clock_contract(mode: str, device: str) -> None:
    clock = make_clock(mode, torch.device(device))
    assert clock.mode == mode
    assert clock.method  # the result says how it was measured
    fn = Counter(sleep_s=0.002)
    first = clock.first_call(fn)
    clock.warmup(fn, 2)
    samples = clock.sample(fn, 5)
    assert fn.calls == 1 + 2 + 5  # one call per sample, nothing hidden
    assert len(samples) == 5
    assert first >= 2.0
    # A host sleep inside the timed call is inside every CPU sample; on the GPU nothing is queued,
    # so event samples are tiny but still positive.
    assert all(s > 0 for s in samples)
    if mode == "cpu":
        assert all(2.0 <= s < 1000 for s in samples)


def test_cpu_clock_returns_n_positive_samples() -> None:
    samples = CpuClock().sample(lambda: sum(range(1000)), 7)
    assert len(samples) == 7
    assert all(isinstance(s, float) and s > 0 for s in samples)


def test_cpu_clock_syncs_before_start_and_stop() -> None:
    events: list[str] = []
    clock = CpuClock(sync=lambda: events.append("sync"))
    clock.sample(lambda: events.append("call"), 2)
    assert events == ["sync", "call", "sync"] * 2
    assert "synchronized" in clock.method


def test_auto_on_cpu_is_cpu_clock() -> None:
    clock = make_clock("auto", torch.device("cpu"))
    assert isinstance(clock, CpuClock)
    assert clock.mode == "cpu" and clock.sync is None and clock.l2_flushed is False


def test_cuda_event_on_cpu_device_rejected() -> None:
    with pytest.raises(ValueError, match="cuda_event"):
        make_clock("cuda_event", torch.device("cpu"))


def test_unknown_mode_rejected() -> None:
    with pytest.raises(ValueError, match="'wall'"):
        make_clock("wall", torch.device("cpu"))


@pytest.mark.skipif(not CUDA, reason=NO_CUDA)
def test_auto_on_cuda_is_event_clock_with_l2_flush() -> None:
    clock = make_clock("auto", torch.device("cuda", 0))
    assert isinstance(clock, CudaEventClock)
    assert clock.l2_flushed and "L2 flushed" in clock.method
    warm = make_clock("auto", torch.device("cuda", 0), flush_l2=False)
    assert not warm.l2_flushed and "warm" in warm.method


@pytest.mark.skipif(not CUDA, reason=NO_CUDA)
def test_cuda_event_clock_counts_device_time() -> None:
    device = torch.device("cuda", 0)
    clock = CudaEventClock(device)
    spin_cycles = int(clock._cycles_per_ms * 2.0)  # a kernel that runs ~2 ms on the device
    fn = lambda: torch.cuda._sleep(spin_cycles)  # noqa: E731
    clock.warmup(fn, 3)
    samples = clock.sample(fn, 5)
    # The host returns from fn at once; the samples must still cover the 2 ms kernel.
    assert all(1.5 <= s <= 20.0 for s in samples), samples
