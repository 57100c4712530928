"""Energy per call (bench/measure/energy.py): counter steps into segments, power × time per call, the pair's ratio.

The window's arithmetic runs here against a simulated GPU (a device clock, a board at a set power, an energy counter
that steps every 50 ms), so it checks on the CPU that the energy per call is the power times the window's time per
call, that partial periods at either end never enter, and that a counter that steps too rarely says so. The child's
energy stage runs on the CPU too (it says why nothing was measured); on a GPU, a real matmul is measured.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.define.discovery import VariantSpec
from bench.define.result import Generation, VariantResult
from bench.define.timing import EnergyUse
from bench.isolate.runner import run_variant
from bench.measure import energy
from bench.measure.compare import _energy_ratio
from bench.measure.energy import Unavailable, measure_energy, segments
from bench.record.contract import energy_metrics, variant_tags

CUDA = torch.cuda.is_available()
gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA device; torch.cuda.is_available() is False on this machine")


def test_segments_start_and_end_on_counter_steps() -> None:
    ticks = [(0.05, 100), (0.12, 170), (0.31, 360), (0.40, 450), (0.52, 570), (0.58, 630)]
    # from the first step at or after 0.1 s; each segment >= 0.15 s; the 0.06 s tail after 0.52 is dropped
    assert segments(ticks, start=0.1, min_s=0.15) == [(pytest.approx(0.19), 190.0), (pytest.approx(0.21), 210.0)]
    assert segments(ticks, start=1.0) == []
    assert segments([], start=0.0) == []


class FakeGPU:
    """A device that runs each unit of work in ``unit_ms`` at ``watts``, idling at ``idle_w``, with an energy
    counter that steps every ``step_ms`` (the board's energy up to that step), and a host clock that advances
    ``poll_ms`` per host action. Patched into bench.measure.energy's BOUND."""

    def __init__(self, unit_ms: float, watts: float, step_ms: float = 50.0, idle_w: float = 70.0) -> None:
        self.unit_ms, self.watts, self.step_ms, self.idle_w = unit_ms, watts, step_ms, idle_w
        self.host_ms = 0.0
        self.busy_until = 0.0  # device time (ms) its queue runs to
        self.busy: list[tuple[float, float]] = []  # intervals the device ran

    # the host's clock
    def perf_counter(self) -> float:
        self.host_ms += 0.02
        return self.host_ms / 1e3

    def energy_mj(self, at_ms: float) -> float:
        busy = sum(max(0.0, min(b, at_ms) - a) for a, b in self.busy)
        return self.watts * busy + self.idle_w * (at_ms - busy)  # W x ms = mJ

    def counter(self) -> int:
        step = (self.host_ms // self.step_ms) * self.step_ms
        return int(self.energy_mj(step))

    def work(self) -> None:
        start = max(self.busy_until, self.host_ms)
        self.busy_until = start + self.unit_ms
        self.busy.append((start, self.busy_until))
        self.host_ms += 0.01

    # events: recorded at the queue's end, complete once the host's clock passes it
    def Event(self, enable_timing: bool = False) -> dict[str, float]:  # noqa: N802 (torch's name)
        return {}

    def record(self, ev: dict[str, float]) -> None:
        ev["at"] = max(self.busy_until, self.host_ms)

    def query(self, ev: dict[str, float]) -> bool:
        if self.host_ms < ev["at"]:
            self.host_ms += 0.5  # the host spins on the queue
            return False
        return True

    def event_synchronize(self, ev: dict[str, float]) -> None:
        self.host_ms = max(self.host_ms, ev["at"])

    def elapsed_time(self, a: dict[str, float], b: dict[str, float]) -> float:
        return b["at"] - a["at"]

    def synchronize(self, device: Any) -> None:
        self.host_ms = max(self.host_ms, self.busy_until)

    def poller(self, read: Any, t0: float) -> FakePoller:
        return FakePoller(self, t0)


class FakePoller:
    """An ideal poller of the fake's counter: every step between the window's start and its end, at its time."""

    def __init__(self, dev: FakeGPU, t0: float) -> None:
        self.dev, self.t0_ms, self.ticks = dev, t0 * 1e3, []

    def __enter__(self) -> FakePoller:
        return self

    def __exit__(self, *exc: object) -> None:
        dev, step = self.dev, self.dev.step_ms
        at = (self.t0_ms // step + 1) * step
        while at <= dev.host_ms:
            self.ticks.append(((at - self.t0_ms) / 1e3, int(dev.energy_mj(at))))
            at += step


class Counter:
    def __init__(self, gpu: FakeGPU) -> None:
        self.read = gpu.counter


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def make(**kwargs: float) -> FakeGPU:
        dev = FakeGPU(**kwargs)
        for name in ("perf_counter", "Event", "record", "query", "event_synchronize", "elapsed_time", "synchronize"):
            monkeypatch.setattr(energy.BOUND, name, getattr(dev, name), raising=False)
        return dev

    return make


def test_energy_per_call_is_the_power_times_the_windows_time_per_call(fake: Any) -> None:
    dev = fake(unit_ms=4.0, watts=500.0)  # 4 ms units of 8 calls: 0.5 ms a call at 500 W = 250 mJ
    e = measure_energy(dev.work, 8, "a graph of 8 calls", Counter(dev), seconds=1.5, batch_ms=0.5, poller=dev.poller)
    assert e.per_call_ms == pytest.approx(0.5, rel=1e-3)
    assert e.power_w == [pytest.approx(500.0, rel=0.01)] * len(e.power_w)  # the GPU never idled in a segment
    assert len(e.samples_mj) >= 10 and all(s == pytest.approx(250.0, rel=0.01) for s in e.samples_mj)
    assert e.step_ms == pytest.approx(50.0, rel=0.05)
    assert e.calls == 8 * len(dev.busy) and e.notes == []
    assert "NVML board energy counter" in e.method and "a graph of 8 calls" in e.method
    gaps = [b[0] - a[1] for a, b in zip(dev.busy, dev.busy[1:], strict=False)]
    assert max(gaps) == 0.0  # the feeder kept units queued: the device never waited for the host


def test_the_poller_notes_each_counter_step_at_its_time() -> None:
    """Each step noted once, in order, at the time of the read that saw it; on a quiet host nearly every step,
    soon after it happened. A loaded host may keep the thread off the CPU past a step: the value it then reads is
    the counter's at that time (never a past step at the present time), and most steps are still noted."""
    import statistics
    import time

    t0 = time.perf_counter()
    read = lambda: int((time.perf_counter() - t0) / 0.02)  # noqa: E731  (a counter that steps every 20 ms)
    with energy._Poller(read, t0) as poller:
        time.sleep(0.4)
    values = [v for _, v in poller.ticks]
    assert values == sorted(set(values)) and values[0] >= 1  # each step once, in order
    assert len(values) >= 0.7 * values[-1] and len(values) >= 10  # most steps seen (20 at 20 ms in 0.4 s)
    # the noted time lies inside the step that was read: [0.02 v, 0.02 (v + 1)), up to the read's own length
    assert all(0.02 * v - 0.002 <= t < 0.02 * (v + 1) + 0.002 for t, v in poller.ticks)
    assert statistics.median(t - 0.02 * v for t, v in poller.ticks) < 0.01  # typically noted within 10 ms


def test_a_window_at_another_speed_than_the_batch_is_noted(fake: Any) -> None:
    dev = fake(unit_ms=4.0, watts=700.0)
    e = measure_energy(dev.work, 4, "graph", Counter(dev), 1.0, batch_ms=0.8, poller=dev.poller)  # 1.0 ms a call
    assert e.per_call_ms == pytest.approx(1.0, rel=1e-3)
    assert e.samples_mj[0] == pytest.approx(700.0, rel=0.01)  # the window's own time per call, not the batch's
    assert len(e.notes) == 1 and "another speed" in e.notes[0]


def test_a_counter_that_steps_too_rarely_is_refused(fake: Any) -> None:
    dev = fake(unit_ms=4.0, watts=500.0, step_ms=400.0)
    with pytest.raises(Unavailable, match=r"stepped 2 times in 1 s, 1 segments .*raise energy_seconds"):
        measure_energy(dev.work, 1, "eager calls", Counter(dev), seconds=1.0, poller=dev.poller)


def _result(key: str, samples: list[float] | None, unavailable: str | None = None) -> VariantResult:
    chapter, example, variant = key.split(":")
    spec = VariantSpec(chapter=chapter, example=example, variant=variant, path="x.py")
    use = EnergyUse(samples_mj=samples or [], power_w=[400.0] * len(samples or []), per_call_ms=1.0, calls=10,
                    window_s=2.0, step_ms=20.0, method="NVML", unavailable=unavailable)  # fmt: skip
    return VariantResult(spec=spec, status="ok", energy=use, work={"flops": 2e9, "bytes": 1e6})


def test_a_pairs_energy_ratio_has_an_interval_from_both_sides_samples() -> None:
    base = _result("ch01:a:baseline", [2.0, 2.1, 1.9, 2.0, 2.05, 1.95])
    opt = _result("ch01:a:optimized", [0.5, 0.52, 0.48, 0.5, 0.51, 0.49])
    ratio, low, high = _energy_ratio(base, opt)
    assert ratio == pytest.approx(4.0)
    assert low is not None and high is not None and low < 4.0 < high and high / low < 1.3
    assert _energy_ratio(base, _result("ch01:a:optimized", None, "a CPU")) == (None, None, None)


def test_the_run_carries_energy_metrics_or_why_there_are_none() -> None:
    metrics = energy_metrics(_result("ch01:a:optimized", [0.5, 0.6, 0.4]))
    assert metrics["energy_per_call_mj"] == pytest.approx(0.5)
    assert metrics["energy_power_w"] == 400.0 and metrics["energy_segments"] == 3.0
    assert metrics["energy_pj_per_flop"] == pytest.approx(0.5e9 / 2e9)  # 0.25 pJ per FLOP
    assert metrics["energy_pj_per_byte"] == pytest.approx(0.5e9 / 1e6)
    tokens = _result("ch15:decode:optimized", [3.0, 3.2, 2.8])
    tokens.generation = Generation(requests=4, tokens=100, arrival="all at once", samples=3, steps=25,
                                   ttft_ms={"median": 1.0}, step_ms={"median": 1.0}, tokens_per_s=1e4,
                                   requests_per_s=400.0)  # fmt: skip
    assert energy_metrics(tokens)["energy_per_token_mj"] == pytest.approx(0.03)
    none = _result("ch01:a:baseline", None, "this variant ran on the CPU")
    assert energy_metrics(none) == {}
    assert variant_tags(none)["perflab.energy"] == "not measured: this variant ran on the CPU"


def _spec(path: Path) -> VariantSpec:
    return VariantSpec(chapter="ch01", example="a", variant="baseline", path=str(path))


FAST = {"warmup": 1, "iterations": 3, "min_warmup_seconds": 0.0, "min_rounds": 1, "max_rounds": 1}


def test_a_cpu_variant_says_why_it_has_no_energy(tmp_path: Path, write_benchmark: Any) -> None:
    bench = write_benchmark(tmp_path / "baseline_a.py")
    result = run_variant(_spec(bench), tmp_path / "wd", cli_layer={**FAST, "device": "cpu", "measure_energy": True})
    assert result.status == "ok", result.error
    assert result.energy is not None and "ran on the CPU" in (result.energy.unavailable or "")
    assert [s.status for s in result.stages if s.name == "energy"] == ["ok"]
    plain = run_variant(_spec(bench), tmp_path / "wd2", cli_layer={**FAST, "device": "cpu"})
    assert plain.energy is None and "energy" not in [s.name for s in plain.stages]  # no stage unless asked for


SCALE = textwrap.dedent(
    """
    import torch
    from bench import context

    N = 64 * 2**20  # 256 MiB of fp32: every call streams from HBM

    class Scale:
        def setup(self):
            ctx = context()
            g = torch.Generator(device=ctx.device).manual_seed(ctx.seed)
            self.x = torch.randn(N, device=ctx.device, generator=g)
            self.out = torch.empty_like(self.x)

        def benchmark_fn(self):
            for _ in range({repeat}):
                torch.mul(self.x, 2.0, out=self.out)

        def teardown(self):
            del self.x, self.out

        def get_output(self):
            return self.out

        def get_work(self):
            return {{"bytes": {repeat} * 8 * N}}

    def get_benchmark():
        return Scale()
    """
)


@gpu
def test_a_gpu_window_runs_the_calls_back_to_back_and_twice_the_work_takes_twice_the_energy(tmp_path: Path) -> None:
    energies = []
    for repeat in (1, 2):
        path = tmp_path / f"baseline_scale{repeat}.py"
        path.write_text(SCALE.format(repeat=repeat))
        layer = {"device": "cuda", "measure_energy": True, "energy_seconds": 2.0}
        result = run_variant(_spec(path), tmp_path / f"wd{repeat}", cli_layer=layer)
        assert result.status == "ok", result.error
        e = result.energy
        assert e is not None and e.unavailable is None, e
        assert len(e.samples_mj) >= 10 and 80 < e.step_ms < 120  # the H100's and H200's counter: 100 ms steps
        # streaming from HBM loads the board well above idle (~80 W on an H200) and below its 700 W limit
        assert all(200 < p < 750 for p in e.power_w), e.power_w
        # a memory-bound call is not power-capped: at the batch's speed unless the GPU idled between calls (an NVML
        # read between launches made the window 19-70 % slower)
        assert result.batch is not None
        assert e.per_call_ms == pytest.approx(result.batch.stats.median_ms, rel=0.03)
        assert e.notes == []
        energies.append(e.median_mj)
    assert energies[1] / energies[0] == pytest.approx(2.0, rel=0.08)


def test_the_suite_shows_energy_only_for_pairs_that_measured_it() -> None:
    from rich.console import Console

    from bench.cli.common import energy_table
    from bench.define.result import Comparison, SuiteResult, Verification
    from bench.record.summary import summary_dict, summary_markdown

    def pair(example: str, energy: tuple[float, float, float, float, float] | None) -> Comparison:
        fields = dict(zip(("baseline_energy_mj", "optimized_energy_mj", "energy_ratio", "energy_ratio_ci_low",
                           "energy_ratio_ci_high"), energy or (None,) * 5, strict=True))  # fmt: skip
        same = Verification(verified=True, outcome="match", detail="equal")
        return Comparison(chapter="ch07", example=example, variant="optimized", baseline_status="ok",
                          optimized_status="ok", status="ok", speedup=2.0, verification=same, **fields)  # fmt: skip

    variants = [_result(f"ch07:{e}:{v}", None) for e in ("copy", "fused") for v in ("baseline", "optimized")]
    plain = SuiteResult(variants=variants, comparisons=[pair("copy", None), pair("fused", None)])
    assert energy_table(plain) is None
    assert "Energy per call" not in summary_markdown(summary_dict(plain))
    suite = SuiteResult(variants=variants, comparisons=[pair("copy", None), pair("fused", (0.9, 0.3, 3.0, 2.8, 3.2))])
    out = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    out.print(energy_table(suite, width=80))
    text = out.export_text()
    assert "fused" in text and "copy" not in text and "900" in text and "300" in text and "3.00×" in text
    assert "µJ" in text and "2.80–3.20" in text and max(map(len, text.splitlines())) <= 80
    md = summary_markdown(summary_dict(suite))
    assert "| ch07:fused | optimized | 900 | 300 | 3.00× [2.80, 3.20] |" in md


def test_a_benchmark_that_replaces_the_energy_counter_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is a dependency; not installed here")
    energy.BOUND.bind_nvml()
    original = pynvml.nvmlDeviceGetTotalEnergyConsumption
    assert energy.BOUND.nvml_energy is original
    assert "pynvml.nvmlDeviceGetTotalEnergyConsumption" not in energy.BOUND.tampered()
    monkeypatch.setattr(pynvml, "nvmlDeviceGetTotalEnergyConsumption", lambda handle: 0)  # "uses no energy"
    assert "pynvml.nvmlDeviceGetTotalEnergyConsumption" in energy.BOUND.tampered()  # the child ends invalid
    assert energy.BOUND.nvml_energy is original  # and the counter the harness reads is the one bound before
