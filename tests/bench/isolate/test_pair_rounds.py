"""bench/isolate/rounds.py (with the workers): a pair measured in interleaved rounds, each side a fresh child per
round, later rounds timing only; the rounds stop on the interval; a host-clocked round's threads capped to the free
cores (bench/measure/cores.py); compile caches kept (bench/isolate/process.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.define.config import resolve_config
from bench.define.discovery import discover, select
from bench.isolate.process import child_env
from bench.isolate.runner import run_variant
from bench.isolate.suite import run_suite
from bench.measure import cores

# busy_rounds "keep": these tests count rounds, which a round left out on a busy test host would change
FAST = {"warmup": 1, "iterations": 5, "min_warmup_seconds": 0.0, "device": "cpu", "busy_rounds": "keep"}
# The rounds a user gets, where a test does not fix them ($PERFLAB_ROUNDS unset: each child reads it from its caller's
# environment, the process's server serves it: bench.isolate.rendezvous). This file's tests and test_kept.py's on one
# process: a group handed out first (tests/scheduling.py)
pytestmark = [pytest.mark.usefixtures("default_rounds"), pytest.mark.xdist_group("default_rounds")]

# The call sleeps for SLEEP_MS, times what drifts: the "host" is slower by DRIFT for every child started before.
TIMED = """
SLEEP_MS = {sleep_ms}
DRIFT = {drift}
with open({starts!r}, "a+") as _f:
    _f.write("x")
    _f.seek(0)
    SLOWER = 1.0 + DRIFT * (len(_f.read()) - 1)
CHECKS = {checks!r}
_fn = Bench.benchmark_fn


def _timed(self):
    _fn(self)
    time.sleep(SLEEP_MS * 1e-3 * SLOWER)


def _validate(self):
    with open(CHECKS, "a") as f:
        f.write("x")
    return None


Bench.benchmark_fn = _timed
Bench.validate_result = _validate
"""


def pair(tmp_path: Path, write_benchmark: Any, base_ms: float, opt_ms: float, drift: float = 0.0) -> Path:
    root = tmp_path / "chapters"
    starts = str(tmp_path / "starts")
    for variant, ms in (("baseline", base_ms), ("optimized", opt_ms)):
        checks = str(tmp_path / f"{variant}.checks")
        write_benchmark(root / "ch07" / f"{variant}_a.py", extra=TIMED.format(sleep_ms=ms, drift=drift, starts=starts,
                                                                               checks=checks))  # fmt: skip
    return root


def test_sides_alternate_each_round_a_fresh_child_and_only_the_first_round_checks(tmp_path, write_benchmark) -> None:
    root = pair(tmp_path, write_benchmark, 2.0, 2.0)
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "min_rounds": 3, "max_rounds": 3})
    order = [(t["key"].rsplit(":", 1)[1], t["round"]) for t in suite.timeline]
    assert order == [("baseline", 0), ("optimized", 0), ("optimized", 1), ("baseline", 1), ("baseline", 2),
                     ("optimized", 2)]  # fmt: skip
    for v in suite.variants:
        assert v.status == "ok" and v.timing is not None and v.timing.rounds == [5, 5, 5]
        assert len(v.timing.samples_ms) == 15 and v.timing.stats.n == 15
        # the host CPU's speed reference read before and after each round's measurement (bench.measure.hostspeed)
        assert [len(r) for r in v.timing.host_ref_ms] == [2, 2, 2]
        assert all(x > 0 for r in v.timing.host_ref_ms for x in r)
        assert (tmp_path / f"{v.spec.variant}.checks").read_text() == "x"  # validate_result(): round 0 only
        assert [s.name for s in v.stages if s.status == "ok"][:5] == ["startup", "setup", "warmup", "measurement",
                                                                     "check"]  # fmt: skip
    (c,) = suite.comparisons
    # three rounds either way: the last one allowed, or (the same code on a quiet host) within the precision too
    assert len(c.round_speedups) == 3 and c.rounds_stop in ("max_rounds", "precision") and c.verification.verified
    assert c.speedup_ci_low is not None and c.speedup_ci_low <= c.speedup <= c.speedup_ci_high


# Each set-up appends what its context says of its round: "F" (the first round's child) or "T" (timing only).
SEES_ROUND = """
from bench import context

_setup = Bench.setup


def _seen(self):
    with open({seen!r}, "a") as f:
        f.write("T" if context().timing_only else "F")
    _setup(self)


Bench.setup = _seen
"""


def test_a_later_rounds_set_up_knows_it_only_times(tmp_path, write_benchmark) -> None:
    """What a set-up makes for the record alone (a memory snapshot: chapters/ch13/memory.py) is made once, in the
    first round's child; ``timing_only`` says which child it is in."""
    root = tmp_path / "chapters"
    for variant in ("baseline", "optimized"):
        write_benchmark(root / "ch07" / f"{variant}_a.py", extra=SEES_ROUND.format(seen=str(tmp_path / variant)))
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "min_rounds": 3, "max_rounds": 3})
    assert all(v.status == "ok" for v in suite.variants)
    for variant in ("baseline", "optimized"):
        assert (tmp_path / variant).read_text() == "FTT"


def test_drift_between_the_sides_is_a_verdict_in_one_round_and_no_verdict_in_rounds(tmp_path, write_benchmark) -> None:
    """The same code on both sides while the host slows down, a step for every child: measured one side after the
    other the later side reads slower, confidently; in alternating rounds the drift hits both and the interval
    holds 1.0."""
    # calls of 10 ms: a loaded host's late wake-ups (a few ms) stay small beside the drift (10 ms a child here, 10
    # samples a side: five of a loaded host's sleeps read 0.64x [0.56, 1.13] at half that drift)
    one = pair(tmp_path / "one", write_benchmark, 10.0, 10.0, drift=1.0)
    one_round = {**FAST, "iterations": 10, "min_rounds": 1, "max_rounds": 1}
    c1 = run_suite(select(discover(one)), cli_layer=one_round).comparisons[0]
    assert c1.significance == "slower", (c1.speedup, c1.speedup_ci_low, c1.speedup_ci_high)
    many = pair(tmp_path / "many", write_benchmark, 10.0, 10.0, drift=0.5)
    c3 = run_suite(select(discover(many)), cli_layer={**FAST, "min_rounds": 3, "max_rounds": 3}).comparisons[0]
    assert c3.significance == "no significant difference", (c3.round_speedups, c3.speedup_ci_low, c3.speedup_ci_high)
    assert min(c3.round_speedups) < 1.0 < max(c3.round_speedups)  # the order reversed: the drift both ways


@pytest.mark.slow  # 160 ms calls, a load-proof 10x (~15 s); the rounds' other rules are in the fast tier
def test_a_large_difference_stops_at_the_fewest_rounds(tmp_path, write_benchmark) -> None:
    # 10x with sleeps long enough that a loaded host's late wake-ups (CI read 4.5 ms on a 3 ms sleep: one round
    # 3.2x of 8x) leave every round's ratio near 10
    root = pair(tmp_path, write_benchmark, 160.0, 16.0)
    suite = run_suite(select(discover(root)), cli_layer=FAST)  # the defaults: at least 3 rounds, at most 8
    (c,) = suite.comparisons
    assert c.rounds_stop == "decided" and len(c.round_speedups) == 3, (c.round_speedups, c.rounds_stop)
    assert c.significance == "faster" and 5 < c.speedup < 14


# Each call appends its process to CALLS: how many calls each round's child made.
COUNTED = """
SLEEP_MS = {sleep_ms}
CALLS = {calls!r}
_fn = Bench.benchmark_fn


def _counted(self):
    _fn(self)
    time.sleep(SLEEP_MS * 1e-3)
    with open(CALLS, "a") as f:
        f.write(f"{{os.getpid()}}\\n")


Bench.benchmark_fn = _counted
"""


@pytest.mark.slow  # calls of 0.5 s and 0.25 s, three rounds: ~20 s
def test_a_slow_pair_with_a_large_difference_takes_the_fewest_rounds_and_calls(tmp_path, write_benchmark) -> None:
    """Calls of seconds (chapters 13-20) with a 2x difference: decided at min_rounds, each later round's child
    making its first call, a warm-up of two steady-state windows (a window spans 0.5 s: one call of 0.5 s, two of
    0.25 s) and the samples max_measure_seconds holds, the checks in round 0 only. With warm-up windows of five calls
    a child of the 0.5 s side made 13 calls; with the default count kept, 7."""
    root = tmp_path / "chapters"
    for variant, ms in (("baseline", 500.0), ("optimized", 250.0)):
        extra = "import os\n" + COUNTED.format(sleep_ms=ms, calls=str(tmp_path / f"{variant}.calls"))
        write_benchmark(root / "ch07" / f"{variant}_a.py", extra=extra)
    suite = run_suite(select(discover(root)), cli_layer={"device": "cpu"})  # the defaults otherwise
    (c,) = suite.comparisons
    assert c.rounds_stop == "decided" and len(c.round_speedups) == 3 and c.significance == "faster", c
    for v, warm, samples in ((suite.variants[0], 2, 2), (suite.variants[1], 4, 4)):
        lines = (tmp_path / f"{v.spec.variant}.calls").read_text().split()
        per_child = [lines.count(pid) for pid in dict.fromkeys(lines)]  # in the order the children ran
        assert len(per_child) == 3 and v.timing is not None, per_child
        assert all(1 <= n <= samples for n in v.timing.rounds)  # max_measure_seconds (1 s) of calls per round
        # later rounds time only: the first call, the warm-up (one more window where the host wobbled), the samples
        later = zip(per_child[1:], v.timing.rounds[1:], strict=True)
        assert all(n <= 1 + warm + warm // 2 + k for n, k in later), (v.spec.variant, per_child, v.timing.rounds)
        assert per_child[0] > per_child[1]  # round 0's checks, batch and recheck call it more


def test_a_round_capped_to_the_free_cores_says_so(tmp_path, write_benchmark) -> None:
    import torch

    if torch.get_num_threads() < 2:
        pytest.skip("torch runs one intra-op thread here: nothing to cap")
    path = write_benchmark(tmp_path / "chapters" / "ch07" / "baseline_a.py")
    (spec,) = select(discover(path.parents[1]))[0].variants
    extra = {"threads": 1, "threads_note": "capped for the test"}
    capped = run_variant(spec, tmp_path / "wd", cli_layer=FAST, job_extra=extra)
    assert capped.status == "ok" and capped.timing is not None and capped.timing.threads == [1]
    assert "capped for the test" in capped.timing.notes
    plain = run_variant(spec, tmp_path / "wd2", cli_layer=FAST)
    assert plain.timing is not None and plain.timing.threads == [torch.get_num_threads()]
    assert "capped for the test" not in plain.timing.notes


def test_free_cores_counts_a_core_busy_once_others_use_half_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(cores.time, "sleep", lambda s: None)
    monkeypatch.setattr(cores, "process_cpu_s", lambda: 5.0)  # this process used nothing in between

    def seen(busy_s: float) -> tuple[int, int, float] | None:
        readings = iter([(100.0, 400.0), (100.0 + busy_s, 402.0)])  # 2 s of CPU time over the window: 2 cores
        monkeypatch.setattr(cores, "cpu_times", lambda: next(readings))
        return cores.free_cores()

    assert seen(0.2)[:2] == (2, 2)  # a blip: both free
    assert seen(1.0)[:2] == (1, 2)  # one core's worth busy (a `while True` beside us)
    assert seen(2.0)[:2] == (1, 2)  # both busy: still one thread
    assert cores.free_cores(fresh=False) == seen(2.0)  # the latest reading, while a child of ours runs


def test_compile_caches_persist_unless_set_and_cold_compile_starts_empty(tmp_path: Path) -> None:
    warm = child_env(resolve_config({"device": "cpu"}), {"HOME": str(tmp_path), "PATH": "/bin"})
    assert warm["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / ".cache" / "perflab" / "inductor")
    assert warm["TRITON_CACHE_DIR"] == str(tmp_path / ".cache" / "perflab" / "triton")
    own = child_env(resolve_config({"device": "cpu"}), {"HOME": str(tmp_path), "TRITON_CACHE_DIR": "/mine"})
    assert own["TRITON_CACHE_DIR"] == "/mine"  # the user's own choice stands
    stale = tmp_path / "cold" / "inductor"
    stale.mkdir(parents=True)
    (stale / "old").write_text("compiled before")
    cold = child_env(resolve_config({"device": "cpu", "cold_compile": True}), {"TRITON_CACHE_DIR": "/mine"},
                     tmp_path / "cold")  # fmt: skip
    assert cold["TORCHINDUCTOR_CACHE_DIR"] == str(stale) and not stale.exists()  # emptied: compiled from nothing
    assert cold["TRITON_CACHE_DIR"] == str(tmp_path / "cold" / "triton")


def _result(spec: Any, ms: float, status: str = "ok", flags: tuple[str, ...] = (), **config: Any) -> Any:
    from bench.define.result import Timing, VariantResult
    from bench.measure.stats import summarize

    samples = [ms * f for f in (0.99, 1.0, 1.01)]
    timing = Timing(mode="cpu", method="t", samples_ms=samples, stats=summarize(samples), machine_flags=list(flags))
    return VariantResult(spec=spec, status=status, timing=timing if status == "ok" else None, device="cpu",
                         config={"min_rounds": 3, "max_rounds": 8, **config})  # fmt: skip


def _rounds(tmp_path: Path, write_benchmark: Any) -> Any:
    from bench.isolate.rounds import Rounds

    root = tmp_path / "chapters"
    for name in ("baseline_a", "optimized_a", "optimized_a_b"):
        write_benchmark(root / "ch07" / f"{name}.py")
    (example,) = select(discover(root))
    return Rounds(example, resolve_config({"device": "cpu"}))


def test_a_settled_pair_leaves_the_rounds_and_a_time_limit_may_stop_at_two(tmp_path, write_benchmark) -> None:
    r = _rounds(tmp_path, write_benchmark)
    base, opt, opt_b = r.example.variants
    ms = {base.key: 10.0, opt.key: 5.0, opt_b.key: 10.0}  # opt: 2x, settles at 3 rounds; opt_b: A/A, runs on
    for number in range(3):
        specs = r.start()
        assert [s.key for s in specs] == [s.key for s in (base, opt, opt_b)][:: -1 if number % 2 else 1]
        wobble = {opt_b.key: (1.0, 1.2, 0.85)[number]}  # opt_b's rounds disagree: its interval stays wide
        done = [r.add(s, _result(s, ms[s.key] * wobble.get(s.key, 1.0))) for s in specs]
        assert done == [False, False, True] and not r.done
    assert r.stops == {opt.key: "decided"}
    assert [s.key for s in r.start()] == [opt_b.key, base.key]  # reversed, without the settled pair
    (c_opt, c_b) = r.compare(None)
    assert len(c_opt.round_speedups) == 3 and c_opt.rounds_stop == "decided"
    # A slow pair: another round would pass max_rounds_seconds; two rounds may be all, below min_rounds.
    slow = _rounds(tmp_path / "slow", write_benchmark)
    for _ in range(2):
        for s in slow.start():
            slow.add(s, _result(s, 10.0, max_rounds_seconds=1e-6))
    assert slow.done and set(slow.stops.values()) == {"time_limit"}
    # Two rounds that took 100 s of a 120 s limit: a third would end at ~150 s, within twice the limit, and runs
    # (two rounds' interval has 1 degree of freedom); after it the limit stops the pair.
    late = _rounds(tmp_path / "late", write_benchmark)
    for number, spent in enumerate((60.0, 100.0, 170.0)):
        late.t0 = time.monotonic() - spent
        for s in late.start():
            late.add(s, _result(s, 10.0 * (1.0, 1.3, 0.8)[number] if s.is_baseline else 10.0, max_rounds_seconds=120))
        assert late.done == (number == 2), (number, late.stops)
    assert set(late.stops.values()) == {"time_limit"}
    # Rounds fixed at 3: a 2x pair ran all of them, nothing stopped early (its interval at 95 %, not EARLY_LEVEL).
    fixed = _rounds(tmp_path / "fixed", write_benchmark)
    for _ in range(3):
        for s in fixed.start():
            fixed.add(s, _result(s, ms[s.key], min_rounds=3, max_rounds=3))
    assert fixed.done and fixed.stops == {opt.key: "max_rounds", opt_b.key: "max_rounds"}
    assert [c.rounds_stop for c in fixed.compare(None)] == ["max_rounds", "max_rounds"]


def test_a_pair_within_the_noise_threshold_settles_as_equivalent(tmp_path, write_benchmark) -> None:
    """Rounds that agree on a 0.05 % difference (two processes of the same code): within the default ±1 % band the
    pairs are settled at min_rounds, "equivalent", and read no significant difference; with noise_threshold=0 the
    same rounds are "decided" and "slower"."""
    for threshold, stop, verdict in ((None, "equivalent", "no significant difference"), (0.0, "decided", "slower")):
        r = _rounds(tmp_path / str(threshold), write_benchmark)
        base, *opts = r.example.variants
        config = {} if threshold is None else {"noise_threshold": threshold}
        for number in range(3):
            for s in r.start():
                r.add(s, _result(s, 10.0 if s == base else 10.0 * (1.0005, 1.00055, 1.0005)[number], **config))
        assert r.done and r.stops == {o.key: stop for o in opts}, r.stops
        assert [c.significance for c in r.compare(None)] == [verdict, verdict]


def test_a_failed_round_is_the_variants_result_and_its_pair_stops(tmp_path, write_benchmark) -> None:
    r = _rounds(tmp_path, write_benchmark)
    base, opt, opt_b = r.example.variants
    for s in r.start():
        r.add(s, _result(s, 10.0))
    for s in r.start():
        r.add(s, _result(s, 10.0, status="failed" if s == opt else "ok"))
    assert r.stops[opt.key] == "optimized failed in round 1"
    merged = {v.spec.key: v for v in r.results()}
    assert merged[opt.key].status == "failed" and merged[base.key].timing.rounds == [3, 3]
    base_fails = _rounds(tmp_path / "b", write_benchmark)
    for s in base_fails.start():
        base_fails.add(s, _result(s, 10.0, status="failed" if s.is_baseline else "ok"))
    assert base_fails.done and set(base_fails.stops.values()) == {"baseline failed"}


def test_a_generating_pair_runs_in_rounds_and_drift_is_no_verdict(tmp_path: Path) -> None:
    """Token generation (TPOT here) in rounds too: the same engine on both sides while the host slows down, a step
    for every child started; one child a side reads the later side slower, in rounds the interval holds 1.0 and is
    taken over the rounds' TPOT ratios."""
    from tests.bench.measure.test_generation import ENGINE_FILE

    drifting = (
        ENGINE_FILE.format(decode_s=0.004, cheat=False)
        .replace(
            "class Bench:",
            f"with open({str(tmp_path / 'starts')!r}, 'a+') as _f:\n    _f.write('x')\n    _f.seek(0)\n"
            "    SLOWER = float(len(_f.read()))\n\n\nclass Bench:",
        )
        .replace("time.sleep(DECODE_S)", "time.sleep(DECODE_S * SLOWER)")
    )

    def run(name: str, rounds: int, iterations: int = 4) -> Any:
        root = tmp_path / name / "chapters"
        (root / "ch15").mkdir(parents=True)
        for variant in ("baseline", "optimized"):
            (root / "ch15" / f"{variant}_gen.py").write_text(drifting)
        layer = {**FAST, "iterations": iterations, "min_rounds": rounds, "max_rounds": rounds}
        return run_suite(select(discover(root)), cli_layer=layer, workdir=tmp_path / name / "w")

    # One round's interval is over its generations (bench.measure.generation.pair_interval, whole ones resampled, its
    # half-widths times t(G - 1) / z): on a loaded 2-core host a 4 ms sleep's step wakes up to 8 ms late, whole
    # generations at a time, and 4 a side (t(3) / z = 1.62) read the 0.49x drift [0.41, 1.00] and [0.39, 1.39], "no
    # significant difference", in 2 runs of 34 (a top of 0.93 in one that passed); with 12 a side (t(11) / z = 1.12)
    # 20 runs of 20 under the same load stayed "slower", the interval's top at most 0.75.
    (one,) = run("one", 1, iterations=12).comparisons
    assert one.speedup_metric == "tpot" and one.significance == "slower", (one.speedup_ci_low, one.speedup_ci_high)
    suite = run("many", 4)
    (many,) = suite.comparisons
    assert many.speedup_metric == "tpot" and len(many.round_speedups) == 4, many.round_speedups
    assert many.significance == "no significant difference", (many.speedup, many.speedup_ci_low, many.round_speedups)
    assert min(many.round_speedups) < 1.0 < max(many.round_speedups)  # the order reversed: the drift both ways
    # The values shown beside the speedup are every round's TPOT, pooled: round 0's alone (the baseline's child the
    # first started, the optimized the second: twice as slow) would read 0.5 beside "no significant difference".
    assert 0.7 < many.baseline_value / many.optimized_value < 1.4, (many.baseline_value, many.optimized_value)
    for v in suite.variants:
        g = v.generation
        assert g.samples == len(g.ttft_samples_ms) == len(g.tokens_per_s_samples) == sum(v.timing.rounds), v.spec.key


def test_a_comparison_that_raises_is_a_failed_pair_the_suite_goes_on(tmp_path, write_benchmark, monkeypatch) -> None:
    """A fault in the comparison itself (the H200's math domain error from times at or below 0 ms stopped a whole
    suite): that pair is recorded failed, naming the error; the variants' results and the other pairs are kept."""
    from bench.isolate import rounds
    from bench.measure.compare import compare

    root = tmp_path / "chapters"
    for example in ("a", "b"):
        for variant in ("baseline", "optimized"):
            write_benchmark(root / "ch07" / f"{variant}_{example}.py")

    def faulty(baseline, optimized, **kw):
        if optimized.spec.example == "a":
            raise ValueError("math domain error")
        return compare(baseline, optimized, **kw)

    monkeypatch.setattr(rounds, "compare", faulty)
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "min_rounds": 1, "max_rounds": 1},
                      workdir=tmp_path / "work")  # fmt: skip
    assert [v.status for v in suite.variants] == ["ok"] * 4
    pairs = {c.example: c for c in suite.comparisons}
    assert pairs["a"].status == "failed" and "ValueError: math domain error" in pairs["a"].verification.detail
    assert pairs["a"].baseline_median_ms is not None
    assert pairs["b"].status == "ok" and pairs["b"].speedup is not None


def test_a_round_whose_host_was_busy_is_left_out_and_the_pair_measures_around_it(tmp_path, write_benchmark) -> None:
    """An A/A pair whose round 1 was starved (a side's 0.146 ms call read 29 ms beside another process, the
    measurement flagged "host busy"): that round is left out of the speedup, the pair runs a fourth round for its
    third calm one and settles with no verdict near 1.0; the variant's own result keeps every round. Unflagged, the
    same round pulls the four rounds' geometric mean to ~0.27x."""
    busy = ("host busy: other processes used 63 % of the host's CPU time during the measurement",)
    for flagged in (True, False):
        r = _rounds(tmp_path / str(flagged), write_benchmark)
        base, *opts = r.example.variants
        for number in range(4):
            if r.done:
                break
            for s in r.start():
                starved = number == 1 and s != base
                r.add(s, _result(s, 29.0 if starved else 0.146 * (1.0, 1.0004, 0.9997, 1.0002)[number],
                                 flags=busy if starved and flagged else ()))  # fmt: skip
        comparisons = r.compare(None)
        if flagged:
            assert r.number == 3 and r.stops == {o.key: "equivalent" for o in opts}, (r.number, r.stops)
            assert [c.rounds_left_out for c in comparisons] == [[1], [1]]
            assert all(len(c.round_speedups) == 3 and 0.99 < c.speedup < 1.01 for c in comparisons)
            assert [c.significance for c in comparisons] == ["no significant difference"] * 2
            merged = {v.spec.key: v for v in r.results()}
            assert merged[opts[0].key].timing.rounds == [3, 3, 3, 3]  # the variant's result keeps every round
        else:
            assert all(c.rounds_left_out == [] and c.speedup < 0.3 for c in comparisons), comparisons
    kept = _rounds(tmp_path / "keep", write_benchmark)
    for number in range(3):
        for s in kept.start():
            starved = number == 1 and s != kept.example.variants[0]
            kept.add(s, _result(s, 29.0 if starved else 0.146, flags=busy if starved else (), busy_rounds="keep"))
    assert all(c.rounds_left_out == [] and c.speedup < 0.3 for c in kept.compare(None))  # "keep": every round counts


def test_merged_rounds_report_the_worst_rounds_noise_and_each_rounds_stop() -> None:
    """A variant over its rounds: ``target_met`` only where every round met its noise target, and its noise (MLflow's
    ``timing_noise_pct``) the worst round's: round 0's alone read 1.0 % beside a target not met (2.5 % in round 1)."""
    from bench.define.result import Timing, VariantResult, VariantSpec
    from bench.isolate.merged import merge
    from bench.measure.stats import summarize

    def one(noise: float, met: bool) -> VariantResult:
        t = Timing(mode="cpu", method="t", samples_ms=[1.0, 1.1], stats=summarize([1.0, 1.1]), noise=noise,
                   noise_target=0.02, target_met=met, stop_reason="noise_target" if met else "max_time")  # fmt: skip
        spec = VariantSpec(chapter="ch07", example="a", variant="baseline", path="/x/baseline_a.py")
        return VariantResult(spec=spec, status="ok", timing=t, device="cpu")

    merged = merge([one(0.010, True), one(0.025, False), one(0.015, True)]).timing
    assert merged is not None and merged.target_met is False and merged.noise == pytest.approx(0.025)
    assert merged.rounds == [2, 2, 2] and merge([one(0.010, True), one(0.012, True)], [0]).timing.noise == 0.010
    assert merged.stop_reason == "noise_target 2, max_time 1"  # each round's, not round 0's alone
    assert merge([one(0.010, True), one(0.012, True)]).timing.stop_reason == "noise_target"


def test_a_memory_pairs_rounds_stop_on_its_peaks_and_pool_them(tmp_path, write_benchmark) -> None:
    """A memory pair (its verdict on the peak: bench.measure.memory) settles on each round's ratio of peaks, not on
    its times (which here wobble as an A/A pair's would, and alone would run on): 2x less memory in every round is
    decided at min_rounds, the same peaks settle on the interval's width ("precision"); the merged side holds every
    round's readings."""
    from bench.define.timing import Memory

    for opt_mb, stop in ((100.0, "decided"), (200.0, "precision")):
        r = _rounds(tmp_path / str(opt_mb), write_benchmark)
        base, *opts = r.example.variants
        for number in range(3):
            for s in r.start():
                mb = 200.0 if s == base else opt_mb
                res = _result(s, 10.0 * (1.0 if s == base else (1.0, 1.2, 0.85)[number]))
                memory = Memory(device="cuda:0", peak_mb=mb, metric="peak_memory", call_peaks_mb=[mb, mb + 0.5])
                r.add(s, res.model_copy(update={"memory": memory}))
        assert r.done and r.stops == {o.key: stop for o in opts}, r.stops
        for c in r.compare(None):
            assert c.speedup_metric == "peak_memory" and c.rounds_stop == stop
            assert c.speedup == pytest.approx(200.25 / (opt_mb + 0.25)) and len(c.round_speedups) == 3
        merged = r.results()[0].memory
        assert merged is not None and len(merged.call_peaks_mb) == 6


def test_a_memory_pair_without_readings_decides_on_its_times(tmp_path, write_benchmark) -> None:
    """On a CPU a memory pair has no call peaks (its ratio is None): its rounds settle on the times, as any pair's."""
    from bench.define.timing import Memory

    r = _rounds(tmp_path, write_benchmark)
    base, *opts = r.example.variants
    for _ in range(3):
        for s in r.start():
            res = _result(s, 10.0 if s == base else 5.0)
            r.add(s, res.model_copy(update={"memory": Memory(device="cpu", peak_mb=300.0, metric="peak_memory")}))
    assert r.done and r.stops == {o.key: "decided" for o in opts}


def test_merged_rounds_keep_each_rounds_host_reference_and_name_a_slow_round() -> None:
    """A variant's rounds, each with its host CPU reference [before, after] (bench.measure.hostspeed): round 2's read
    1.6x the fastest round's, so the merged timing says so in a note; its samples, rounds and verdicts stay as they
    are. Within 1.3x: no note."""
    from bench.define.result import Timing, VariantResult, VariantSpec
    from bench.isolate.merged import merge
    from bench.measure.stats import summarize

    def one(ref: list[float]) -> VariantResult:
        t = Timing(mode="cpu", method="t", samples_ms=[1.0, 1.1], stats=summarize([1.0, 1.1]), host_ref_ms=[ref])
        spec = VariantSpec(chapter="ch07", example="a", variant="baseline", path="/x/baseline_a.py")
        return VariantResult(spec=spec, status="ok", timing=t, device="cpu")

    slow = merge([one([0.80, 0.81]), one([0.82, 0.80]), one([0.80, 1.30]), one([0.84, 0.83])]).timing
    assert slow is not None and slow.host_ref_ms == [[0.80, 0.81], [0.82, 0.80], [0.80, 1.30], [0.84, 0.83]]
    (note,) = [n for n in slow.notes if n.startswith("host CPU slow")]
    assert note.startswith("host CPU slow in round 2: a fixed CPU reference ran 1.60× its fastest of these rounds")
    assert slow.rounds == [2, 2, 2, 2] and len(slow.samples_ms) == 8  # a note only: every round's samples kept
    calm = merge([one([0.80, 0.81]), one([0.82, 1.04]), one([0.84, 0.83])]).timing
    assert calm is not None and not any(n.startswith("host CPU slow") for n in calm.notes)
    # the rounds a pair's timing is pooled over (``timed``): each named by its own number
    picked = merge([one([0.80, 0.81]), one([5.0, 5.0]), one([0.80, 1.30])], [0, 2]).timing
    assert picked is not None and any(n.startswith("host CPU slow in round 2:") for n in picked.notes)
    # result.json: the field round-trips; a result written before it existed still loads, with none
    again = VariantResult.model_validate_json(merge([one([0.8, 0.9]), one([0.8, 1.3])]).model_dump_json())
    assert again.timing is not None and again.timing.host_ref_ms == [[0.8, 0.9], [0.8, 1.3]]
    old = one([1.0, 1.0]).model_dump(mode="json")
    del old["timing"]["host_ref_ms"]
    assert VariantResult.model_validate(old).timing.host_ref_ms == []
