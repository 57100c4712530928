"""bench.measure.generation: step timing, TTFT / TPOT / throughput, arrivals, protocol checks, the pair's speedup
metric, and a token-generating pair run end to end through the harness on the CPU."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.define.discovery import discover, select
from bench.define.result import Generation, VariantResult, VariantSpec
from bench.errors import ProtocolError
from bench.isolate.suite import run_suite
from bench.measure.compare import compare
from bench.measure.generation import (
    RequestSpec,
    SampleRecord,
    is_generating,
    pair_interval,
    pair_speedup,
    read_requests,
    run_generation,
    summarize,
)
from bench.measure.generation_clock import GenerationClock, generation_clock
from bench.measure.stopping import StopRule


class Engine:
    """A fake engine with known costs: a step costs 1 unit + 1 unit per token it processes (a prefill counts the
    prompt, a decode one token per running request); every admitted request gets a token per step.

    Requests: r0 (prompt 4, 3 tokens, at 0), r1 (prompt 2, 2 tokens, at 0), r2 (prompt 3, 2 tokens, at 25 units).
    Time line, in units: [0, 7] prefill r0 + r1 (6 tokens): first tokens of r0, r1 at 7; [7, 10] decode r0, r1;
    [10, 12] decode r0 (r1 done); idle until 25; [25, 29] prefill r2; [29, 31] decode r2. So TTFT r0 7, r1 7,
    r2 4; TPOT r0 (12 - 7) / 2 = 2.5, r1 3, r2 2; span 31, 7 tokens, idle 13.
    """

    PROMPTS, NEW, ARRIVALS, OFFSETS = (4, 2, 3), (3, 2, 2), (0.0, 0.0, 25.0), (0, 3, 5)

    def __init__(self, unit_ms: float = 1.0, sleep: bool = False) -> None:
        self.unit, self.sleep = unit_ms, sleep
        self.out = torch.zeros(7, dtype=torch.int64)  # request r's tokens from offset OFFSETS[r]
        self.start_generation()

    def get_requests(self) -> list[dict[str, Any]]:
        return [
            {"prompt_tokens": p, "new_tokens": n, "arrival_ms": a * self.unit}
            for p, n, a in zip(self.PROMPTS, self.NEW, self.ARRIVALS, strict=True)
        ]

    def start_generation(self) -> None:
        self.waiting, self.running, self.emitted, self.cost = [0, 1, 2], [], [0, 0, 0], 0.0
        self.nows: list[float] = []

    def generate_step(self, now_ms: float) -> dict[int, int] | None:
        self.nows.append(now_ms)
        if not self.waiting and not self.running:
            return None
        new = [r for r in self.waiting if self.ARRIVALS[r] * self.unit <= now_ms]
        self.waiting = [r for r in self.waiting if r not in new]
        work = [*new] if new else list(self.running)
        tokens = sum(self.PROMPTS[r] for r in new) if new else len(work)
        self.cost = (1 + tokens) * self.unit
        if self.sleep:
            time.sleep(self.cost / 1e3)
        self.running += new
        for r in work:
            self.out[self.OFFSETS[r] + self.emitted[r]] = 10 * r + self.emitted[r]
            self.emitted[r] += 1
        self.running = [r for r in self.running if self.emitted[r] < self.NEW[r]]
        return {r: 1 for r in work}

    def get_output(self) -> torch.Tensor:
        return self.out


def fake_timer(engine: Engine) -> Any:
    """A step timer that reads the engine's own cost: exact times, no clock involved."""

    def timer(call: Any) -> tuple[Any, float]:
        out = call()
        return out, engine.cost

    return timer


def test_ttft_tpot_span_and_idle_on_known_step_times() -> None:
    e = Engine()
    rec = run_generation(e, read_requests(e), fake_timer(e))
    assert rec.steps_ms == [7, 3, 2, 4, 2]
    assert rec.ttft_ms == [7, 7, 4]
    assert rec.tpot_ms == [2.5, 3, 2]
    assert rec.itl_ms == [3, 3, 2, 2]  # r0 and r1 at 10 (from 7), r0 at 12 (from 10), r2 at 31 (from 29)
    assert (rec.span_ms, rec.tokens, rec.idle_ms) == (31, 7, 13)
    assert e.nows == [0, 7, 10, 25, 29, 31]  # the engine never saw the idle gap: the clock jumped to r2's arrival
    s = summarize([rec, rec], read_requests(e), "tpot")
    assert s["ttft_ms"]["median"] == 7 and s["tpot_ms"]["median"] == 2.5
    assert s["tokens_per_s"] == pytest.approx(7 / 0.031) and s["requests_per_s"] == pytest.approx(3 / 0.031)
    assert s["steps"] == 5 and s["idle_ms"] == 13 and s["prompt_tokens"] == 9
    assert s["arrival"] == "3 requests arriving over 0-25 ms"
    assert s["ttft_samples_ms"] == [[7, 7, 4]] * 2 and s["itl_samples_ms"] == [[3, 3, 2, 2]] * 2  # per generation
    gen = Generation(**s)
    assert gen.metrics() == {
        "tokens_per_s": pytest.approx(7 / 0.031),
        "requests_per_s": pytest.approx(3 / 0.031),
        **{f"ttft_{q}_ms": 7 for q in ("median", "p50", "p90", "p95", "p99")},
        "ttft_mean_ms": pytest.approx(6.0),
        "tpot_median_ms": 2.5,
        "tpot_p50_ms": 2.5,
        "tpot_p90_ms": 3.0,  # pooled [2, 2, 2.5, 2.5, 3, 3]: p90 interpolates between the two 3s
        "tpot_p95_ms": 3.0,
        "tpot_p99_ms": 3.0,
        "tpot_mean_ms": pytest.approx(2.5),
        "itl_median_ms": 2.5,
        "itl_p50_ms": 2.5,
        "itl_p90_ms": 3.0,
        "itl_p95_ms": 3.0,
        "itl_p99_ms": 3.0,
        "itl_mean_ms": pytest.approx(2.5),
    }


def test_cpu_clock_measures_the_step_times() -> None:
    """Through the real clock (perf_counter), steps that sleep 8 ms a unit: TTFT and TPOT come out in proportion
    (a TPOT that counted the first token, or a TTFT from the generation's start, would not). The generation of the
    shortest span is checked: a stall of the host only adds time (one read a TTFT of 483 ms for 32 beside a busy
    core), and a fault of the clock would be in every generation."""
    unit = 8.0
    e = Engine(unit_ms=unit, sleep=True)
    clock = generation_clock(e, None, torch.device("cpu"))
    assert isinstance(clock, GenerationClock) and clock.mode == "cpu"
    clock.min_warmup_s = 0.0
    m = clock.measure(lambda: None, 3, StopRule())
    assert len(m.samples_ms) == 3
    rec = min(clock.records, key=lambda r: r.span_ms)
    for got, want in zip(rec.ttft_ms, [7, 7, 4], strict=True):
        assert want * unit <= got < want * unit * 1.3 + 3
    for got, want in zip(rec.tpot_ms, [2.5, 3, 2], strict=True):
        assert want * unit * 0.9 <= got < want * unit * 1.3 + 3  # type: ignore[operator]
    assert 31 * unit <= rec.span_ms < 31 * unit * 1.3 + 10
    assert rec.idle_ms < 13 * unit  # steps ran long, the gap to r2 shrank: never more than 13 units
    assert clock.wrote_output() is True


@pytest.mark.parametrize(("again", "floor_s", "unit_ms", "generations"), [
    (False, 0.0, 1.0, 2), (True, 0.0, 1.0, 0), (True, 0.01, 1.0, 0), (False, 0.01, 1.0, 2), (True, 0.3, 10.0, 1),
])  # fmt: skip
def test_a_later_round_of_the_same_process_warms_up_with_its_first_call_alone(again, floor_s, unit_ms,
                                                                              generations) -> None:  # fmt: skip
    """``warmup`` 3: two generations after the first call in a fresh process; none in a later round of a process that
    warmed up before (``again``: a kept child), ``min_warmup_s`` counted from the first call's start there: a
    generation of 18 ms of steps passes a 10 ms floor by itself; two of 180 ms (the first call and one more) pass a
    0.3 s floor, which counted from the warm-up's start would take two generations after the first call."""
    from types import SimpleNamespace

    clock = generation_clock(Engine(unit_ms=unit_ms, sleep=True), SimpleNamespace(min_warmup_seconds=floor_s),
                             torch.device("cpu"), again=again)  # fmt: skip
    assert clock is not None and clock.again is again
    first_ms = clock.first_call(lambda: None)
    clock.warmup(lambda: None, clock.warmup_count(SimpleNamespace(warmup=3)))
    assert first_ms >= 18 * unit_ms
    assert clock.warmup_done == (0 if first_ms >= 1e3 * floor_s and again else generations)  # a slow host's first call


def test_unfinished_request_is_a_protocol_error() -> None:
    e = Engine()
    steps = iter([{0: 3, 1: 2}, None])
    e.generate_step = lambda now_ms: next(steps)  # type: ignore[method-assign]
    clock = generation_clock(e, None, torch.device("cpu"))
    assert clock is not None
    with pytest.raises(ProtocolError, match="1 request\\(s\\) unfinished: request 2 emitted 0 of 2 tokens"):
        clock.measure(lambda: None, 1, StopRule())


def test_poison_left_in_the_output_is_reported() -> None:
    e = Engine()
    step = e.generate_step

    def lazy(now_ms: float) -> dict[int, int] | None:
        out = step(now_ms)
        e.out[6] = -1  # r2's last token is never written
        return out

    e.generate_step = lazy  # type: ignore[method-assign]
    clock = generation_clock(e, None, torch.device("cpu"))
    assert clock is not None
    clock.measure(lambda: None, 1, StopRule())
    assert clock.wrote_output() is False


@pytest.mark.parametrize(
    "bad,message",
    [
        ({0: 1, 2: 1}, "request 2 emitted a token before its arrival at 25 ms"),
        ({0: 4}, "request 0 emitted 4 tokens, declared new_tokens=3"),
        ({5: 1}, r"request index 5 is not in 0..2"),
        ({0: -1}, "request 0 emitted -1 tokens"),
        ([1, 1], "returned 2 counts for 3 requests"),
        ("x", "returned str"),
    ],
)
def test_engine_mistakes_are_protocol_errors(bad: Any, message: str) -> None:
    e = Engine()
    e.generate_step = lambda now_ms: bad  # type: ignore[method-assign]
    with pytest.raises(ProtocolError, match=message):
        run_generation(e, read_requests(e), fake_timer(e))


def test_a_waiting_engine_moves_the_clock_to_the_next_arrival() -> None:
    """A static batcher that waits for its batch: an empty result means "nothing until more arrive"."""
    e = Engine()
    e.get_requests = lambda: [{"new_tokens": 1}, {"new_tokens": 1, "arrival_ms": 40.0}]  # type: ignore[method-assign]
    e.cost = 1.0
    steps = iter([{}, {0: 1, 1: 1}, None])
    seen: list[float] = []
    e.generate_step = lambda now_ms: seen.append(now_ms) or next(steps)  # type: ignore[method-assign]
    rec = run_generation(e, read_requests(e), fake_timer(e))
    assert seen == [0.0, 40.0, 41.0]
    assert rec.ttft_ms == [41.0, 1.0] and rec.idle_ms == 39.0 and rec.span_ms == 41.0
    steps = iter([{}])
    e.get_requests = lambda: [{"new_tokens": 1}]  # type: ignore[method-assign]
    with pytest.raises(ProtocolError, match="did nothing with every request arrived and 1 unfinished"):
        run_generation(e, read_requests(e), fake_timer(e))


def test_zero_counts_are_work_without_tokens() -> None:
    e = Engine()
    e.get_requests = lambda: [{"new_tokens": 1}]  # type: ignore[method-assign]
    e.cost = 2.0
    steps = iter([{0: 0}, {0: 0}, {0: 1}, None])  # two prefill chunks, then the token
    e.generate_step = lambda now_ms: next(steps)  # type: ignore[method-assign]
    rec = run_generation(e, read_requests(e), fake_timer(e))
    assert rec.ttft_ms == [6.0] and rec.steps_ms == [2.0, 2.0, 2.0] and rec.tpot_ms == [None]


def test_counts_as_sequence_or_tensor() -> None:
    for counts in ([1, 1, 0], torch.tensor([1, 1, 0])):
        e = Engine()
        calls = iter([counts, None])
        e.generate_step = lambda now_ms, c=calls: next(c)  # type: ignore[misc]
        e.get_requests = lambda: [{"new_tokens": 1}, {"new_tokens": 1}, {"new_tokens": 1, "arrival_ms": 0}]  # type: ignore[method-assign]
        with pytest.raises(ProtocolError, match="request 2 emitted 0 of 1"):
            run_generation(e, read_requests(e), fake_timer(e))


def test_protocol_declaration_and_requests_checked() -> None:
    assert not is_generating(object())
    assert is_generating(Engine())

    class Half:
        def generate_step(self, now_ms: float) -> None: ...

    with pytest.raises(ProtocolError, match="defines generate_step but not get_requests, start_generation"):
        is_generating(Half())
    e = Engine()
    e.get_requests = lambda: [{"new_tokens": 0}]  # type: ignore[method-assign]
    with pytest.raises(ProtocolError, match="request 0: new_tokens=0 must be an int >= 1"):
        read_requests(e)
    e.get_requests = lambda: [RequestSpec(new_tokens=2, arrival_ms=-1.0)]  # type: ignore[method-assign]
    with pytest.raises(ProtocolError, match="arrival_ms=-1.0"):
        read_requests(e)
    e = Engine()
    e.speedup_metric = lambda: "latency"  # type: ignore[attr-defined]
    with pytest.raises(ProtocolError, match="speedup_metric\\(\\) returned 'latency'; accepted: ttft, tpot"):
        generation_clock(e, None, torch.device("cpu"))


def _result(variant: str, gen: dict[str, Any] | None, median: float = 10.0) -> VariantResult:
    from bench.define.result import Timing
    from bench.define.timing import TimingStats

    stats = TimingStats(
        n=3,
        mean_ms=median,
        median_ms=median,
        std_ms=0,
        min_ms=median,
        max_ms=median,
        iqr_ms=0,
        cv=0,
        percentiles_ms={},
    )
    base = {
        "requests": 4,
        "tokens": 40,
        "arrival": "",
        "samples": 3,
        "steps": 10,
        "step_ms": {"median": 1.0},
        "speedup_metric": "time",
        "tokens_per_s": 100.0,
        "requests_per_s": 10.0,
        "ttft_ms": {"median": 8.0, "p90": 9.0, "p99": 9.9},
        "tpot_ms": {"median": 2.0, "p90": 3.0, "p99": 3.9},
        "itl_ms": {"median": 2.0, "p90": 6.0, "p99": 9.9},
    }
    return VariantResult(
        spec=VariantSpec(chapter="ch15", example="x", variant=variant, path="/x"),
        status="ok",
        device="cpu",
        timing=Timing(mode="cpu", method="", samples_ms=[median] * 3, stats=stats),
        generation=Generation(**{**base, **gen}) if gen is not None else None,
    )


@pytest.mark.parametrize(
    "metric,opt,want",
    [
        ("ttft", {"ttft_ms": {"median": 2.0}}, 4.0),
        ("tpot", {"tpot_ms": {"median": 0.5}}, 4.0),
        ("throughput", {"tokens_per_s": 250.0}, 2.5),
        ("ttft_p99", {"ttft_ms": {"median": 8.0, "p90": 3.0, "p99": 3.3}}, 3.0),
        ("itl_p90", {"itl_ms": {"median": 1.0, "p90": 1.5, "p99": 2.0}}, 4.0),
        ("tpot_p95", {"tpot_ms": {"median": 2.0, "p95": 0.5}}, 7.0),
        ("time", {}, 2.0),
    ],
)
def test_speedup_on_the_named_metric(metric: str, opt: dict[str, Any], want: float) -> None:
    """The speedup on the metric the pair names, the two values it divides beside it, and each side's median
    call time kept apart (what the tables show in a column of its own)."""
    b = _result("baseline", {"tpot_ms": {"median": 2.0, "p90": 3.0, "p95": 3.5, "p99": 3.9}})
    o = _result("optimized", {"speedup_metric": metric, **opt}, median=5.0)
    assert pair_speedup(b, o, 2.0) == (pytest.approx(want), metric)
    c = compare(b, o)
    assert c.speedup == pytest.approx(want) and c.speedup_metric == metric
    assert (c.baseline_median_ms, c.optimized_median_ms) == (10.0, 5.0)  # the whole call, whatever the metric
    assert c.baseline_value is not None and c.optimized_value is not None
    ratio = c.optimized_value / c.baseline_value if metric == "throughput" else c.baseline_value / c.optimized_value
    assert ratio == pytest.approx(want)


def test_speedup_falls_back_to_time_without_the_metric() -> None:
    b = _result("baseline", None)
    o = _result("optimized", {"speedup_metric": "ttft"}, median=5.0)
    assert pair_speedup(b, o, 2.0) == (2.0, "time")
    o = _result("optimized", {"speedup_metric": "tpot", "tpot_ms": None}, median=5.0)
    assert pair_speedup(_result("baseline", {}), o, 2.0) == (2.0, "time")


def test_tracking_logs_the_generation_metrics() -> None:
    from bench.record.contract import variant_metrics

    metrics = variant_metrics(_result("optimized", {"speedup_metric": "tpot"}))
    assert {k: metrics[k] for k in metrics if k.startswith(("ttft", "tpot", "itl", "tokens", "requests"))} == {
        "ttft_median_ms": 8.0,
        "ttft_p90_ms": 9.0,
        "ttft_p99_ms": 9.9,
        "tpot_median_ms": 2.0,
        "tpot_p90_ms": 3.0,
        "tpot_p99_ms": 3.9,
        "tokens_per_s": 100.0,
        "requests_per_s": 10.0,
        "itl_median_ms": 2.0,
        "itl_p90_ms": 6.0,
        "itl_p99_ms": 9.9,
    }
    assert "time_median_ms" in metrics


def test_generation_latencies_carry_a_call_times_statistics() -> None:
    """TTFT, TPOT and ITL: mean, p50, p90, p95, p99 as a call time's (time_mean_ms, time_p95_ms ...), each
    from the pooled samples (linear interpolation), logged under ttft_p95_ms and the like."""
    import numpy as np

    from bench.record.contract import variant_metrics

    requests = [RequestSpec(new_tokens=3) for _ in range(4)]
    records = [SampleRecord(30.0, [1.0], [float(i + 10 * g) for i in range(4)], [1.0, 2.0, 3.0, 4.0],
                            [0.5] * 8, 12) for g in range(5)]  # fmt: skip
    gen = summarize(records, requests, "ttft_p95")
    ttft = [float(i + 10 * g) for g in range(5) for i in range(4)]
    want = {"mean": np.mean(ttft), "median": np.median(ttft), "p50": np.median(ttft),
            **{f"p{q}": np.percentile(ttft, q) for q in (90, 95, 99)}}  # fmt: skip
    assert {k: gen["ttft_ms"][k] for k in want} == pytest.approx(want)
    metrics = variant_metrics(_result("optimized", gen))
    for stat in ("mean", "median", "p50", "p90", "p95", "p99"):
        for name in ("ttft", "tpot", "itl"):
            assert f"{name}_{stat}_ms" in metrics, (name, stat)
    assert metrics["ttft_p95_ms"] == pytest.approx(want["p95"])


# --------------------------------------------------------------------------- end to end, through the harness

ENGINE_FILE = '''
import time
import torch

DECODE_S = {decode_s}
CHEAT = {cheat}


class Bench:
    """Requests 0..4 of 1..5 tokens arriving 0, 0, 1, 2, 3 ms; a step emits a token for every admitted one."""

    def setup(self):
        self.out = torch.zeros(15, dtype=torch.int64)  # request i's tokens at offset i * (i + 1) / 2
        if CHEAT:  # the answer written once, in setup: the steps only count
            self.out.copy_(torch.arange(15))

    def get_requests(self):
        return [{{"new_tokens": i + 1, "arrival_ms": float(max(i - 1, 0)), "prompt_tokens": 3}} for i in range(5)]

    def speedup_metric(self):
        return "tpot"

    def start_generation(self):
        self.n = [0] * 5

    def generate_step(self, now_ms):
        if all(self.n[i] == i + 1 for i in range(5)):
            return None
        time.sleep(DECODE_S)
        emitted = {{}}
        for i in range(5):
            if max(i - 1, 0) <= now_ms and self.n[i] < i + 1:
                if not CHEAT:
                    self.out[i * (i + 1) // 2 + self.n[i]] = i * (i + 1) // 2 + self.n[i]
                self.n[i] += 1
                emitted[i] = 1
        return emitted

    def benchmark_fn(self):
        self.start_generation()
        while self.generate_step(float("inf")) is not None:
            pass

    def teardown(self):
        pass

    def get_output(self):
        return self.out


def get_benchmark():
    return Bench()
'''


def test_generating_pair_through_the_harness(tmp_path: Path) -> None:
    root = tmp_path / "chapters"
    (root / "ch15").mkdir(parents=True)
    (root / "ch15" / "baseline_gen.py").write_text(ENGINE_FILE.format(decode_s=0.004, cheat=False))
    (root / "ch15" / "optimized_gen.py").write_text(ENGINE_FILE.format(decode_s=0.001, cheat=False))
    (root / "ch15" / "baseline_cheat.py").write_text(ENGINE_FILE.format(decode_s=0.001, cheat=False))
    (root / "ch15" / "optimized_cheat.py").write_text(ENGINE_FILE.format(decode_s=0.001, cheat=True))
    # the engines compute on the CPU: on a GPU host too (the protocol is under test, not a GPU's clock)
    cli = {"iterations": 4, "warmup": 1, "min_warmup_seconds": 0.0, "device": "cpu"}
    suite = run_suite(select(discover(root)), cli_layer=cli, workdir=tmp_path / "w")
    results = {v.spec.key: v for v in suite.variants}
    base = results["ch15:gen:baseline"]
    assert base.status == "ok", base.error
    gen = base.generation
    assert gen is not None and gen.samples == 4 and gen.requests == 5 and gen.tokens == 15
    assert gen.speedup_metric == "tpot" and gen.arrival == "5 requests arriving over 0-3 ms"
    assert gen.tpot_ms is not None and gen.tpot_ms["median"] >= 4.0  # each decode step sleeps 4 ms
    assert base.timing is not None and len(base.timing.samples_ms) == 4 and base.timing.mode == "cpu"
    assert "token generation" in base.timing.method
    pair = next(c for c in suite.comparisons if c.example == "gen")
    assert pair.status == "ok" and pair.verification.verified, pair.verification.detail
    assert pair.speedup_metric == "tpot" and pair.speedup is not None and pair.speedup > 1.5
    cheat = results["ch15:cheat:optimized"]
    assert cheat.status == "invalid" and cheat.output is not None and cheat.output.timed_calls_wrote_output is False


def test_token_mismatch_says_which_entries_differ() -> None:
    """A greedy flip in one request diverges from there on: the detail says how many tokens and where."""
    from bench.measure.verify import compare_tensors

    ref = torch.arange(40, dtype=torch.int64)
    out = ref.clone()
    out[25:30] = 3
    v = compare_tensors([ref], [out], None)
    assert not v.verified and v.outcome == "mismatch"
    assert v.detail.endswith("(int64); 5 of 40 entries differ, the first at flat index 25")


def test_a_throughput_speedup_has_an_interval_from_each_generation_rate() -> None:
    """Throughput: the ratio of median tokens/s, its interval bootstrapped from the generations' rates (one
    per generation, as TTFT and TPOT use their per-request samples); too few generations give none."""
    base_rates, opt_rates = [98.0, 100.0, 101.0, 103.0], [240.0, 250.0, 251.0, 262.0]
    b = _result("baseline", {"tokens_per_s": 100.5, "tokens_per_s_samples": base_rates})
    o = _result("optimized", {"speedup_metric": "throughput", "tokens_per_s": 250.5,
                              "tokens_per_s_samples": opt_rates}, median=5.0)  # fmt: skip
    c = compare(b, o)
    assert c.speedup_metric == "throughput" and c.speedup == pytest.approx(250.5 / 100.5)
    assert c.speedup_ci_low is not None and c.speedup_ci_high is not None
    assert 2.0 < c.speedup_ci_low < c.speedup < c.speedup_ci_high < 3.0 and c.significance == "faster"
    o = _result("optimized", {"speedup_metric": "throughput", "tokens_per_s": 250.5,
                              "tokens_per_s_samples": [250.0]}, median=5.0)  # fmt: skip
    assert compare(b, o).speedup_ci_low is None


def _measured(
    variant: str, metric: str, seed: int, scale: float = 1.0, generations: int = 8, shared: float = 0.1,
    shape: float = 4.0,
) -> VariantResult:  # fmt: skip
    """A side whose generations are synthetic: 6 requests of 5 tokens, TTFTs (gamma of ``shape``) and ITLs
    drawn (seeded) with a per-generation slowdown (lognormal of sigma ``shared``: the step times every token of
    a generation shares), summarized as measured."""
    import numpy as np

    rng = np.random.default_rng(seed)
    requests = [RequestSpec(new_tokens=5) for _ in range(6)]
    records = []
    for _ in range(generations):
        slow = rng.lognormal(0.0, shared)
        ttft = list(scale * slow * rng.gamma(shape, 20.0 / shape, 6))
        itl = list(scale * slow * rng.gamma(2.0, 1.0, 24))
        tpot = [sum(itl[4 * i : 4 * i + 4]) / 4 for i in range(6)]
        records.append(SampleRecord(max(ttft) + sum(itl), [1.0], ttft, tpot, itl, 30))
    return _result(variant, summarize(records, requests, metric), median=10.0 * scale)


SIDES = ("baseline", "optimized")


@pytest.mark.parametrize("metric", ["itl_p99", "ttft_p90", "tpot_p99", "itl", "ttft", "tpot"])
def test_a_latency_percentile_speedup_has_an_interval_over_generations(metric: str) -> None:
    """A latency's median or percentile: the interval resamples whole generations and holds the point
    estimate; a side twice as slow is faster beyond doubt, two draws of the same engine are not (seeded: with 8
    generations a side, about one pair of draws in ten falls outside)."""
    b = _measured("baseline", metric, seed=1, scale=2.0)
    c = compare(b, _measured("optimized", metric, seed=2))
    assert c.speedup_metric == metric and c.speedup is not None
    assert c.speedup_ci_low is not None and c.speedup_ci_high is not None
    assert 1.0 < c.speedup_ci_low < c.speedup < c.speedup_ci_high and c.significance == "faster"
    same = compare(_measured("baseline", metric, seed=7), _measured("optimized", metric, seed=8))
    assert same.speedup_ci_low is not None and same.speedup_ci_high is not None
    assert same.speedup_ci_low < 1.0 < same.speedup_ci_high and same.significance == "no significant difference"
    assert same.speedup_ci_low < same.speedup < same.speedup_ci_high


def test_a_latency_median_interval_counts_generations_not_requests() -> None:
    """A/A pairs whose generations are slowed as a whole (sigma 0.3 a generation, each request's own spread
    smaller): the TTFT median's interval holds 1.0 in 20 of 20 seeded pairs; an interval over the requests
    pooled as if independent holds it in 15 of them (the within-generation spread is all it sees)."""
    from bench.measure.stats import speedup_interval

    held = pooled_held = 0
    for i in range(20):
        b, o = (_measured(v, "ttft", seed=100 + 2 * i + k, shared=0.3, shape=16.0) for k, v in enumerate(SIDES))
        low, high = pair_interval(b, o, "ttft", 0.0) or (None, None)
        assert low is not None and high is not None
        held += low < 1.0 < high
        pooled = [[v for row in side.generation.ttft_samples_ms for v in row] for side in (b, o)]
        low, high = speedup_interval(pooled[0], pooled[1], 0.0)
        pooled_held += low < 1.0 < high
    assert held >= 19 and pooled_held <= 16


def test_a_percentile_speedup_needs_two_generations_a_side() -> None:
    b, o = _measured("baseline", "itl_p99", seed=1, generations=1), _measured("optimized", "itl_p99", seed=2)
    assert pair_interval(b, o, "itl_p99", 0.0) is None and pair_interval(o, b, "itl_p99", 0.0) is None
    assert compare(b, o).speedup_ci_low is None


GREEDY_FILE = '''
import torch
from bench import BenchmarkConfig

MODE = {mode!r}  # "baseline"; "near": part at the baseline's near-tie, to its runner-up; "far": part elsewhere;
# "lazy": never write the gaps


class Bench:
    """Requests 0..3 of 6 tokens each; a step emits one token of every request, with its runner-up and gap."""

    def setup(self):
        self.tokens = torch.zeros(24, dtype=torch.int64)
        self.runner_up = torch.zeros(24, dtype=torch.int64)
        self.gap = torch.zeros(24, dtype=torch.float32)
        self.offsets = torch.tensor([0, 6, 12, 18, 24])

    def get_config(self):
        return BenchmarkConfig(verify="greedy_tokens")

    def get_requests(self):
        return [{{"new_tokens": 6}}] * 4

    def start_generation(self):
        self.k = 0

    def generate_step(self, now_ms):
        if self.k == 6:
            return None
        for r in range(4):
            i = 6 * r + self.k
            token, second, gap = 10 * r + self.k, 100 + i, 1.0
            if i == 8:  # request 1's token 2: the baseline's top two 2e-6 of the spread apart
                gap = 2e-6
                if MODE == "near":
                    token, second = second, token
            if MODE == "near" and r == 1 and self.k > 2:
                token = 50 + self.k  # what the other engine then generated
            if MODE == "far" and i == 15:  # request 2's token 3, where the baseline's top two were far apart
                token, second = second, token
            self.tokens[i], self.runner_up[i] = token, second
            if MODE != "lazy":
                self.gap[i] = gap
        self.k += 1
        return [1, 1, 1, 1]

    def benchmark_fn(self):
        self.start_generation()
        while self.generate_step(0.0) is not None:
            pass

    def teardown(self):
        pass

    def get_output(self):
        return [self.tokens, self.runner_up, self.gap, self.offsets]


def get_benchmark():
    return Bench()
'''


def test_greedy_tokens_pair_through_the_harness(tmp_path: Path) -> None:
    """verify="greedy_tokens" end to end: the token, runner-up and gap buffers poisoned before each generation
    (the offsets not), a divergence at the baseline's near-tie verified and said, one elsewhere a mismatch, a side
    that leaves its gaps unwritten invalid."""
    root = tmp_path / "chapters"
    (root / "ch15").mkdir(parents=True)
    for name, mode in (("baseline_greedy", "baseline"), ("optimized_greedy", "near"),
                       ("optimized_greedy_far", "far"), ("optimized_greedy_lazy", "lazy")):  # fmt: skip
        (root / "ch15" / f"{name}.py").write_text(GREEDY_FILE.format(mode=mode))
    cli = {"iterations": 2, "warmup": 1, "min_warmup_seconds": 0.0, "device": "cpu"}
    suite = run_suite(select(discover(root)), cli_layer=cli, workdir=tmp_path / "w")
    results = {v.spec.variant: v for v in suite.variants}
    assert results["baseline"].status == "ok", results["baseline"].error
    assert results["baseline"].config["verify"] == "greedy_tokens"
    pairs = {c.variant: c for c in suite.comparisons}
    near = pairs["optimized"]
    assert near.status == "ok" and near.verification.verified, near.verification.detail
    assert near.verification.detail.startswith(
        "tokens equal; 1 of 4 requests diverged at a near-tie (gap 2.0e-06 <= 1e-04), request 1 at token 2, and "
        "was compared up to there (21 of 24 tokens)"
    )
    far = pairs["optimized_far"]
    assert far.status == "mismatch" and far.verification.detail.startswith(
        "request 2 parts from the baseline's tokens at token 3: baseline 23, optimized 115, the baseline's top two"
    )
    lazy = results["optimized_lazy"]
    assert lazy.status == "invalid" and lazy.output is not None and lazy.output.timed_calls_wrote_output is False


def test_a_greedy_tokens_output_is_checked_against_the_request_set() -> None:
    """verify="greedy_tokens": [tokens, runner_up, gap, offsets], the offsets those of the request set (3, 2, 2
    new tokens); poisoned are the first three only."""
    from types import SimpleNamespace

    config = SimpleNamespace(verify="greedy_tokens")
    e = Engine()
    with pytest.raises(ProtocolError, match=r"returned 1 tensor\(s\) of dtypes int64; verify='greedy_tokens' needs"):
        generation_clock(e, config, torch.device("cpu"))
    offsets = torch.tensor([0, 3, 5, 7])
    extra = [torch.zeros(7, dtype=torch.int64), torch.zeros(7), offsets]
    e.get_output = lambda: [e.out, *extra]  # type: ignore[method-assign]
    clock = generation_clock(e, config, torch.device("cpu"))
    assert clock is not None
    clock._poison()
    assert bool((extra[0] == -1).all()) and bool(extra[1].isnan().all()) and offsets.tolist() == [0, 3, 5, 7]
    offsets[1] = 2
    with pytest.raises(ProtocolError, match=r"offsets \[0, 2, 5, 7\]... .* needs offsets \[0, 3, 5, 7\]"):
        generation_clock(e, config, torch.device("cpu"))
