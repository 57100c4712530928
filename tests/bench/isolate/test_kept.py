"""bench/isolate/kept.py (with rounds and workers): a pair's children of round 0 parked between its rounds and timing
the later ones (``round_children``): set up once, the sides still alternating; "auto" keeps them only where set-up is
slow; a kept child that fails, hangs or is interrupted in a later round is recorded and leaves no process behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench.define.config import KEEP_SETUP_S
from bench.define.discovery import discover, select
from bench.isolate.channel import PARKED_FILE
from bench.isolate.suite import run_suite
from bench.isolate.timed import KEPT_NOTE

FAST = {
    "warmup": 1,
    "iterations": 5,
    "min_warmup_seconds": 0.0,
    "device": "cpu",
    "min_rounds": 3,
    "max_rounds": 3,
    "busy_rounds": "keep",
}  # these tests count rounds: none left out on a busy test host
# $PERFLAB_ROUNDS unset (read by each child from its caller's environment: the process's server serves it); on
# test_pair_rounds.py's process, a group handed out first (tests/scheduling.py)
pytestmark = [pytest.mark.usefixtures("default_rounds"), pytest.mark.xdist_group("default_rounds")]

# Each set-up appends the variant's letter to SETUPS; each call's process writes its pid to PIDS; LATER: what the
# benchmark does when its warm-up begins for the second time in one process ("exit7", "hang"; "" nothing).
RECORDS = """
SETUPS = {setups!r}
PIDS = {pids!r}
LATER = {later!r}
FIRST_S = {first_s!r}
CALL_S = {call_s!r}
WARMS = {warms!r}
_setup, _fn = Bench.setup, Bench.benchmark_fn


def _counted_setup(self):
    with open(SETUPS, "a") as f:
        f.write({letter!r})
    self.warmups, self.stage, self.called = 0, "", False
    _setup(self)


def _call(self):
    stage = os.environ.get("PERFLAB_STAGE", "")
    if stage == "warmup" and self.stage != "warmup":
        self.warmups += 1
        with open(PIDS, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        if self.warmups == 2 and LATER == "exit7":
            os._exit(7)
        if self.warmups == 2 and LATER == "hang":
            time.sleep(1000)
    self.stage = stage
    if stage == "warmup":
        with open(WARMS, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
    time.sleep(CALL_S)
    if not self.called:  # the first call of a set-up: a compile, an autotune
        time.sleep(FIRST_S)
        self.called = True
    return _fn(self)


Bench.setup = _counted_setup
Bench.benchmark_fn = _call
"""


def pair(
    tmp_path: Path,
    write_benchmark: Any,
    setup_s: float = 0.0,
    later: str = "",
    first_s: float = 0.0,
    call_s: float = 0.0,
) -> Path:
    root = tmp_path / "chapters"
    for variant in ("baseline", "optimized"):
        extra = RECORDS.format(setups=str(tmp_path / "setups"), pids=str(tmp_path / "pids"), letter=variant[0],
                               later=later if variant == "optimized" else "", first_s=first_s, call_s=call_s,
                               warms=str(tmp_path / "warms"))  # fmt: skip
        write_benchmark(root / "ch07" / f"{variant}_a.py", SETUP_SLEEP=setup_s, extra=extra)
    return root


def gone(pids_file: Path) -> None:
    """Every process that ran a call is gone (a parked child left behind would hold its memory and GPU)."""
    for pid in {int(p) for p in pids_file.read_text().split()}:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().split()[2] == "Z", f"process {pid} of a kept child is still running"


def test_kept_children_set_up_once_and_still_alternate(tmp_path, write_benchmark) -> None:
    root = pair(tmp_path, write_benchmark)
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "round_children": "kept"},
                      workdir=tmp_path / "work", keep_workdir=True)  # fmt: skip
    order = [(t["key"].rsplit(":", 1)[1], t["round"]) for t in suite.timeline]
    assert order == [("baseline", 0), ("optimized", 0), ("optimized", 1), ("baseline", 1), ("baseline", 2),
                     ("optimized", 2)]  # fmt: skip
    assert sorted((tmp_path / "setups").read_text()) == ["b", "o"]  # one set-up a side for three rounds
    pids = (tmp_path / "pids").read_text().split()
    assert len(pids) == 6 and len(set(pids)) == 2  # three warm-ups in each side's one process
    for v in suite.variants:
        assert v.status == "ok" and v.timing is not None and v.timing.rounds == [5, 5, 5], v.error
        assert KEPT_NOTE in v.timing.notes
        assert [len(r) for r in v.timing.host_ref_ms] == [2, 2, 2]  # a kept child's later rounds read it too
        assert all(x > 0 for r in v.timing.host_ref_ms for x in r)
        names = [s.name for s in v.stages if s.status == "ok"]
        assert names[:4] == ["startup", "setup", "warmup", "measurement"] and "check" in names
    (c,) = suite.comparisons
    assert len(c.round_speedups) == 3 and c.verification.verified
    parked = (tmp_path / "work" / "ch07" / "a" / PARKED_FILE).read_text().split()
    assert sorted(parked) == sorted(set(pids))  # listed for their siblings' NVML readings
    gone(tmp_path / "pids")


def test_auto_keeps_children_only_where_set_up_is_slow(tmp_path, write_benchmark) -> None:
    """ "auto": a set-up of KEEP_SETUP_S or more is paid once a side; a quick one again in every round (the rounds'
    spread then holds set-up-to-set-up variation too)."""
    quick = pair(tmp_path / "quick", write_benchmark)
    suite = run_suite(select(discover(quick)), cli_layer=FAST)
    assert sorted((tmp_path / "quick" / "setups").read_text()) == ["b"] * 3 + ["o"] * 3
    why = "rounds after the first each in a fresh child (round_children auto): round 0's start-up, set-up and "
    for v in suite.variants:  # why, in the merged result (its stages are summed over the rounds)
        assert [n for n in v.timing.notes if n.startswith(why)] and KEPT_NOTE not in v.timing.notes, v.timing.notes
    slow = pair(tmp_path / "slow", write_benchmark, setup_s=KEEP_SETUP_S + 0.1)
    suite = run_suite(select(discover(slow)), cli_layer=FAST)
    assert all(v.status == "ok" for v in suite.variants)
    assert sorted((tmp_path / "slow" / "setups").read_text()) == ["b", "o"]
    set_up = sum(s.duration_s or 0.0 for v in suite.variants for s in v.stages if s.name == "setup")
    assert set_up < 4 * KEEP_SETUP_S  # two set-ups summed over the rounds, not six
    assert all(KEPT_NOTE in v.timing.notes and not any("fresh child" in n for n in v.timing.notes)
               for v in suite.variants)  # fmt: skip
    gone(tmp_path / "slow" / "pids")


def test_auto_keeps_children_whose_first_call_is_slow(tmp_path, write_benchmark) -> None:
    """A quick set-up whose first call is slow (a compile, pinned memory allocated): a fresh child would pay it again
    in every round, so "auto" keeps the children."""
    root = pair(tmp_path, write_benchmark, first_s=KEEP_SETUP_S + 0.1)
    suite = run_suite(select(discover(root)), cli_layer=FAST)
    assert all(v.status == "ok" for v in suite.variants)
    assert sorted((tmp_path / "setups").read_text()) == ["b", "o"]
    assert all(v.timing.first_call_ms > 1e3 * KEEP_SETUP_S for v in suite.variants)  # round 0's, as reported
    gone(tmp_path / "pids")


# the kept side in the full tier: tests/bench/measure/test_clocks.py checks its rule, and a kept pair runs above
@pytest.mark.parametrize("children", [pytest.param("kept", marks=pytest.mark.slow), "fresh"])
def test_a_later_round_warms_up_to_round_0s_steady_state_in_one_window(tmp_path, write_benchmark, children) -> None:
    """Round 0 warms up to two windows that agree; a later round's child, kept or fresh, knows the steady state
    round 0 reached and is steady after one window near it (calls of 30 ms: windows of 5)."""
    from bench.measure.clocks import STABLE_WINDOW, stable_window

    root = pair(tmp_path, write_benchmark, call_s=0.03)
    layer = {k: v for k, v in FAST.items() if k != "warmup"}  # the default count: the steady-state rule decides
    suite = run_suite(select(discover(root)), cli_layer={**layer, "round_children": children})
    for v in suite.variants:
        assert v.status == "ok" and v.timing.warmup_steady_ms > 25, (v.status, v.error)
    w = stable_window(30.0)
    assert w == STABLE_WINDOW
    calls = (tmp_path / "warms").read_text().split()
    if children == "fresh":  # a process a side a round: round 0's first call and two windows, later ones' one
        per_process = sorted(calls.count(pid) for pid in set(calls))
        assert per_process == [1 + w] * 4 + [1 + 2 * w] * 2, per_process
    else:  # one process a side: two windows in round 0, one in each of the two later rounds
        assert sorted(calls.count(pid) for pid in set(calls)) == [3 + 4 * w] * 2
    gone(tmp_path / "pids")


def test_fresh_asked_for_is_fresh(tmp_path, write_benchmark) -> None:
    root = pair(tmp_path, write_benchmark, setup_s=KEEP_SETUP_S + 0.1)
    cli = {**FAST, "min_rounds": 2, "max_rounds": 2, "round_children": "fresh"}
    suite = run_suite(select(discover(root)), cli_layer=cli)
    assert sorted((tmp_path / "setups").read_text()) == ["b", "b", "o", "o"]
    for v in suite.variants:
        assert "rounds after the first each in a fresh child (round_children fresh)" in v.timing.notes, v.timing.notes


def test_a_kept_child_that_dies_in_a_later_round_is_recorded(tmp_path, write_benchmark) -> None:
    root = pair(tmp_path, write_benchmark, later="exit7")
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "round_children": "kept"})
    by = {v.spec.variant: v for v in suite.variants}
    assert by["baseline"].status == "ok"
    bad = by["optimized"]
    assert bad.status == "failed" and bad.error is not None
    assert bad.error.message.startswith("round 1 of 2:") and "code 7" in bad.error.message, bad.error.message
    assert bad.failed_stage == "warmup"
    gone(tmp_path / "pids")


@pytest.mark.slow  # a warm-up limit run out (~3 s); the failure of a later round is in the fast tier
def test_a_kept_child_that_hangs_in_a_later_round_times_out(tmp_path, write_benchmark) -> None:
    root = pair(tmp_path, write_benchmark, later="hang")
    cli = {**FAST, "round_children": "kept", "warmup_timeout_seconds": 3.0}
    suite = run_suite(select(discover(root)), cli_layer=cli)
    bad = next(v for v in suite.variants if v.spec.variant == "optimized")
    assert bad.status == "timeout" and bad.failed_stage == "warmup", (bad.status, bad.error)
    gone(tmp_path / "pids")


class _Parked:
    """A parked child as the rounds see it (bench.isolate.kept.Kept's fields)."""

    def __init__(self, held_mb: float = 0.0, total_mb: float | None = None) -> None:
        self.alive, self.held_mb, self.total_mb = True, held_mb, total_mb


def _rounds(tmp_path: Path, write_benchmark: Any, setup_s: float, how: str = "auto", held_mb: float = 0.0,
            clock: str | None = None, timed_s: float = 0.0, startup_s: float = 0.0, launch: str = "server",
            ) -> Any:  # fmt: skip
    """Round 0 of an example of a baseline and two optimized variants, over: each child parked (``clock``: its
    timing's mode, with ``timed_s`` of measurement after 1 s of warm-up; None: no timing)."""
    from bench.define.config import BenchmarkConfig
    from bench.define.result import StageRecord, VariantResult
    from bench.define.timing import Timing, TimingStats
    from bench.isolate.rounds import Rounds

    root = tmp_path / "chapters"
    for name in ("baseline_a.py", "optimized_a.py", "optimized_a_two.py"):
        write_benchmark(root / "ch07" / name)
    (example,) = select(discover(root))
    rounds = Rounds(example, BenchmarkConfig(device="cpu", min_rounds=2, max_rounds=4))
    rounds.start()
    stats = TimingStats(n=3, mean_ms=0.1, median_ms=0.1, std_ms=0.0, min_ms=0.1, max_ms=0.1, iqr_ms=0.0, cv=0.0,
                        percentiles_ms={"p50": 0.1})  # fmt: skip
    timing = Timing(mode=clock, method="", samples_ms=[0.1] * 3, stats=stats, first_call_ms=0.1) if clock else None
    for spec in example.variants:
        spent = (("startup", startup_s), ("setup", setup_s), ("warmup", 1.0), ("measurement", timed_s))
        stages = [StageRecord(name=name, status="ok", duration_s=s) for name, s in spent]
        config = {"round_children": how, "max_rounds": 4}
        result = VariantResult(spec=spec, status="ok", config=config, stages=stages, timing=timing, launch=launch)
        rounds.kept[spec.key] = _Parked(held_mb, 1000.0)
        rounds.by_key[spec.key] = [result]
    rounds.done = False
    return rounds, example


def test_the_rounds_end_the_children_no_round_needs(tmp_path, write_benchmark) -> None:
    rounds, example = _rounds(tmp_path, write_benchmark, setup_s=KEEP_SETUP_S)
    assert rounds.release() == [] and rounds.keeping  # slow set-up: all three kept for round 1
    base, one, two = example.variants
    rounds.number, rounds.stops = 1, {one.key: "decided"}
    assert rounds.resume(two) is rounds.kept[two.key]
    settled = rounds.kept[one.key]
    assert rounds.release() == [settled]
    assert set(rounds.kept) == {base.key, two.key}  # the settled pair's optimized side ended, its baseline goes on
    rounds.done = True
    assert len(rounds.release()) == 2 and not rounds.kept


@pytest.mark.parametrize(("setup_s", "how", "held_mb"), [(KEEP_SETUP_S / 2, "auto", 0.0), (10.0, "fresh", 0.0),
                                                         (10.0, "auto", 200.0)])  # fmt: skip
def test_later_rounds_take_fresh_children_where_kept_ones_do_not_pay(tmp_path, write_benchmark, setup_s, how,
                                                                      held_mb) -> None:  # fmt: skip
    """A quick set-up, "fresh" asked for, or parked children holding more than half the device's memory (3 x 200 of
    1,000 MiB): every parked child ends after round 0."""
    rounds, _ = _rounds(tmp_path, write_benchmark, setup_s, how, held_mb)
    assert len(rounds.release()) == 3 and not rounds.keeping and not rounds.kept


@pytest.mark.parametrize("clock", ["cuda_event", "cuda_graph", "cpu"])
def test_auto_leaves_a_quick_set_up_fresh_whatever_the_clock(tmp_path, write_benchmark, clock) -> None:
    """A set-up under KEEP_SETUP_S (0.4 s a child) takes a fresh child every round even where it costs more than the
    round's measurement (0.2 s): kept children of chapters 7-9's small kernels on the H200 read 28 A/A pairs with 23
    intervals holding 1.0 (fresh ones: 27), one of them 1.0164x [1.0120, 1.0209], a difference between two
    processes that only fresh children put in the rounds' spread."""
    rounds, _ = _rounds(tmp_path, write_benchmark, 0.4, clock=clock, timed_s=0.2)
    assert len(rounds.release()) == 3 and not rounds.keeping


@pytest.mark.parametrize(("launch", "keeping"), [("server", True), ("cold_start", False)])
def test_a_fresh_interpreters_start_up_is_not_the_variants_to_repay(tmp_path, write_benchmark, launch, keeping) -> None:
    """A start-up of 2.6 s: a benchmark file's imports in a forked child (the variant's own cost, paid again by a
    fresh child: kept), or Python and torch in a fresh interpreter (``--cold-start``: the launch's, every child's;
    kept, one softmax's two processes, 1.3 and 2.5 ms a call on the 2-core host, read an A/A pair 0.63x slower)."""
    rounds, _ = _rounds(tmp_path, write_benchmark, 0.1, startup_s=2.6, launch=launch)
    rounds.release()
    assert rounds.keeping is keeping


def _round_1(rounds: Any) -> list[Any]:
    """After ``release()``: round 1 over (each variant's round 0 result again), the example done; its merged
    results."""
    for results in rounds.by_key.values():
        results.append(results[0])
    rounds.number, rounds.done = 1, True
    return rounds.results()


@pytest.mark.parametrize(("setup_s", "how", "held_mb", "parked", "why"), [
    (KEEP_SETUP_S / 2, "auto", 0.0, 3, "(round_children auto): round 0's start-up, set-up and first-call excess came "
     "to 0.50 s (slowest variant, baseline), under the 1 s a kept child would save"),
    (10.0, "fresh", 0.0, 0, "(round_children fresh)"),  # none asked to park
    (10.0, "auto", 200.0, 3, "(round_children auto): parked children would hold 600 of 1,000 MiB, over half the "
     "device's"),
    (10.0, "kept", 0.0, 2, "(round_children kept): a child did not park (optimized_two)"),
], ids=["quick", "fresh", "memory", "unparked"])  # fmt: skip
def test_later_rounds_in_fresh_children_say_why(tmp_path, write_benchmark, setup_s, how, held_mb, parked,
                                                why) -> None:  # fmt: skip
    """Where round 0's children are not kept, each variant's merged result says why, with round 0's figures (its
    stages are summed over the rounds: round 0's can't be read back from it)."""
    rounds, _ = _rounds(tmp_path, write_benchmark, setup_s, how, held_mb, clock="cpu")
    for key in list(rounds.kept)[parked:]:
        del rounds.kept[key]
    rounds.release()
    assert not rounds.keeping
    for v in _round_1(rounds):
        assert v.timing.notes == [f"rounds after the first each in a fresh child {why}"]


def test_kept_children_and_a_single_round_leave_no_fresh_note(tmp_path, write_benchmark) -> None:
    rounds, _ = _rounds(tmp_path, write_benchmark, KEEP_SETUP_S, clock="cpu")
    rounds.release()
    assert rounds.keeping and rounds.keep_note is None
    assert all(v.timing.notes == [] for v in _round_1(rounds))
    once, _ = _rounds(tmp_path / "once", write_benchmark, 0.1, clock="cpu")
    once.done = True  # one round is all: no later round to take a child
    once.release()
    assert once.keep_note is None and all(v.timing.notes == [] for v in once.results())


# A token-generating engine: 2 requests of 4 tokens, one step a token each, ``step_s`` a step in its process's first
# round and ``later_s`` in every round after (a round begins where the warm-up stage does); each set-up's letter
# appended to SETUPS; each generation of the warm-up stage (the first call's too) as "<pid> <round>" to GENS.
ENGINE = """
import os
import time
import torch

SETUPS, LETTER, STEP_S, LATER_S, GENS = {setups!r}, {letter!r}, {step_s!r}, {later_s!r}, {gens!r}


class Bench:
    def setup(self):
        with open(SETUPS, "a") as f:
            f.write(LETTER)
        self.out = torch.zeros(8, dtype=torch.int64)
        self.rounds, self.stage = 0, ""

    def get_requests(self):
        return [{{"new_tokens": 4}}] * 2

    def speedup_metric(self):
        return "tpot"

    def start_generation(self):
        stage = os.environ.get("PERFLAB_STAGE", "")
        if stage == "warmup" and self.stage != "warmup":
            self.rounds += 1
        if stage == "warmup":
            with open(GENS, "a") as f:
                f.write(f"{{os.getpid()}} {{self.rounds}}\\n")
        self.stage, self.k = stage, 0

    def generate_step(self, now_ms):
        if self.k == 4:
            return None
        time.sleep(STEP_S if self.rounds <= 1 else LATER_S)
        self.out[self.k], self.out[4 + self.k] = self.k, 10 + self.k
        self.k += 1
        return [1, 1]

    def benchmark_fn(self):
        self.start_generation()
        while self.generate_step(0.0) is not None:
            pass

    def teardown(self):
        pass

    def get_output(self):
        return self.out


def get_benchmark():
    return Bench()
"""


def _engines(tmp_path: Path, baseline: tuple[float, float], optimized: tuple[float, float]) -> Path:
    """A chapters root of one ENGINE pair (ch15:gen), each side's (step_s, later_s); its logs under ``tmp_path``."""
    root = tmp_path / "chapters"
    (root / "ch15").mkdir(parents=True)
    for variant, (step_s, later_s) in (("baseline", baseline), ("optimized", optimized)):
        (root / "ch15" / f"{variant}_gen.py").write_text(ENGINE.format(
            setups=str(tmp_path / "setups"), letter=variant[0], step_s=step_s, later_s=later_s,
            gens=str(tmp_path / "gens")))  # fmt: skip
    return root


def test_a_kept_generating_child_reports_each_rounds_own_generations(tmp_path) -> None:
    """A token-generating pair's later rounds timed in its kept children, each round's generations its own: the
    optimized engine's steps take 2 ms in round 0 (2x the baseline's 4 ms) and 16 ms after (0.25x), so its rounds
    read 2, 0.25, 0.25; generations pooled across a kept child's rounds would read more samples and a later round's
    TPOT from round 0's generations too."""
    root = _engines(tmp_path, (0.004, 0.004), (0.002, 0.016))
    cli = {**FAST, "iterations": 4, "round_children": "kept"}
    suite = run_suite(select(discover(root)), cli_layer=cli, workdir=tmp_path / "w")
    assert sorted((tmp_path / "setups").read_text()) == ["b", "o"]  # one set-up a side for three rounds
    launched = {(t["key"].rsplit(":", 1)[1], t["round"]): t["launch"] for t in suite.timeline}
    assert {r: launched[("optimized", r)] for r in range(3)} == {0: "server", 1: "kept", 2: "kept"}, launched
    for v in suite.variants:
        assert v.status == "ok" and v.timing is not None and v.generation is not None, v.error
        assert v.timing.rounds == [4, 4, 4] and KEPT_NOTE in v.timing.notes
        assert v.generation.samples == 12  # four generations a round, each counted once
    (c,) = suite.comparisons
    assert c.verification.verified and c.speedup_metric == "tpot"
    first, *later = c.round_speedups
    assert 1.5 < first < 2.5 and all(0.15 < r < 0.35 for r in later), c.round_speedups


@pytest.mark.parametrize(("children", "calls"), [("kept", [3, 1, 1]), ("fresh", [3, 3, 3])])
def test_a_kept_generating_childs_later_rounds_warm_up_with_the_first_call_alone(tmp_path, monkeypatch, children,
                                                                                   calls) -> None:  # fmt: skip
    """``warmup`` 3: round 0 warms up with its first call and two generations; a kept child's later round with its
    first call alone (round 0 of its process paid the one-time costs), a fresh child's with all three again. Each
    round's ``warmup_calls`` (read as the rounds get each child's result: the merged result's is round 0's, its
    ``round_warmup_calls`` each round's) and the generations the engine saw in each round's warm-up stage agree."""
    from bench.isolate.rounds import Rounds

    root = _engines(tmp_path, (0.001, 0.001), (0.001, 0.001))
    seen: dict[str, list[int]] = {}
    add = Rounds.add

    def recorded(self: Any, spec: Any, result: Any) -> bool:
        seen.setdefault(spec.variant, []).append(result.timing.warmup_calls if result.timing else -1)
        return add(self, spec, result)

    monkeypatch.setattr(Rounds, "add", recorded)
    cli = {**FAST, "warmup": 3, "iterations": 4, "round_children": children}
    suite = run_suite(select(discover(root)), cli_layer=cli, workdir=tmp_path / "w")
    for v in suite.variants:
        assert v.status == "ok" and v.timing is not None and v.timing.rounds == [4, 4, 4], v.error
        assert v.timing.warmup_calls == 3 and v.timing.first_call_ms > 0 and v.timing.round_warmup_calls == calls
        during = v.timing.host_ref_during_ms  # the host's speed after each measured generation, every round's
        assert during is not None and len(during) == len(v.timing.samples_ms) == 12 and min(during) > 0
    assert seen == {"baseline": calls, "optimized": calls}, seen
    lines = (tmp_path / "gens").read_text().splitlines()
    per_round = sorted(lines.count(line) for line in set(lines))  # warm-up generations of each process's each round
    assert per_round == sorted(calls * 2), per_round


def _generated(tmp_path: Path, warmup: int, generating: bool, median_ms: float = 500.0) -> Any:
    """Round 0's result of a variant: 0.3 s of start-up and set-up, a first call 100 ms over its ``median_ms``; with
    ``generating``, the generations it measured."""
    from bench.define.result import Generation, StageRecord, VariantResult, VariantSpec
    from bench.define.timing import Timing, TimingStats

    spec = VariantSpec(chapter="ch16", example="serve", variant="baseline", path=str(tmp_path / "baseline_serve.py"))
    stats = TimingStats(n=3, mean_ms=median_ms, median_ms=median_ms, std_ms=0.0, min_ms=median_ms, max_ms=median_ms,
                        iqr_ms=0.0, cv=0.0, percentiles_ms={"p50": median_ms})  # fmt: skip
    timing = Timing(mode="cuda_event", method="", samples_ms=[median_ms] * 3, stats=stats,
                    first_call_ms=median_ms + 100.0)  # fmt: skip
    gen = Generation(requests=2, tokens=8, arrival="all at once", samples=3, steps=4, ttft_ms={"median": 1.0},
                     step_ms={"median": 1.0}, tokens_per_s=1.0, requests_per_s=1.0) if generating else None  # fmt: skip
    stages = [StageRecord(name=n, status="ok", duration_s=0.15) for n in ("startup", "setup")]
    return VariantResult(spec=spec, status="ok", config={"warmup": warmup}, stages=stages, timing=timing,
                         launch="server", generation=gen)  # fmt: skip


@pytest.mark.parametrize(("warmup", "generating", "repaid"), [(2, True, 0.9), (4, True, 1.9), (1, True, 0.4),
                                                              (4, False, 0.4)])  # fmt: skip
def test_repaid_counts_a_generating_variants_warm_up_generations(tmp_path, warmup, generating, repaid) -> None:
    """What a kept child saves a token-generating variant: start-up and set-up (0.3 s), the first call's excess
    (0.1 s) and ``warmup`` - 1 generations of round 0's median (0.5 s); a variant that generates no tokens warms up
    to round 0's steady state kept or fresh: no warm-up counted. The fresh note names what it summed."""
    from bench.isolate.rounds import repaid_parts, repaid_s

    first = _generated(tmp_path, warmup, generating)
    assert repaid_s(first) == pytest.approx(repaid)
    counted = "start-up, set-up, first-call excess and warm-up generations"
    assert repaid_parts(first) == (counted if generating and warmup > 1 else "start-up, set-up and first-call excess")
