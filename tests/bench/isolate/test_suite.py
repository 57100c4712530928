"""bench/isolate/suite.py: the suite's timeline (where its wall went) and the longest-first order for parallel
workers, fed by the durations of an earlier run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.define.discovery import discover, select
from bench.isolate.suite import _expected, expected_note, load_durations, run_suite, save_durations
from bench.record.summary import summary_dict

FAST = {"warmup": 2, "iterations": 3, "min_warmup_seconds": 0.0, "device": "cpu", "min_rounds": 1, "max_rounds": 1}


def chapters(tmp_path: Path, write_benchmark: Any, names: str) -> Path:
    root = tmp_path / "chapters"
    for name in names:
        write_benchmark(root / "ch07" / f"baseline_{name}.py")
        write_benchmark(root / "ch07" / f"optimized_{name}.py")
    return root


def test_timeline_accounts_for_every_variant(tmp_path: Path, write_benchmark: Any) -> None:
    suite = run_suite(select(discover(chapters(tmp_path, write_benchmark, "ab"))), cli_layer=FAST)
    keys = [t["key"] for t in suite.timeline]
    assert keys == ["ch07:a:baseline", "ch07:a:optimized", "ch07:b:baseline", "ch07:b:optimized"]
    for t, v in zip(suite.timeline, suite.variants, strict=True):
        assert t["worker"] == 0 and 0 <= t["start_s"] < t["end_s"] <= suite.wall_s
        # The child's whole life: the part run ahead, beside the previous variant (ahead_s), and the rest.
        assert t["run_s"] + t["ahead_s"] >= v.elapsed_s and (t["ahead_s"] > 0) == (v.ahead_s is not None)
        assert (v.ahead_s is not None) == (v.spec.key != keys[0])  # every variant but the first started ahead
        assert (t["compare_s"] > 0) == (v.spec.variant == "optimized")  # only an optimized is compared
    starts = [t["start_s"] for t in suite.timeline]
    assert starts == sorted(starts)
    b = suite.time_breakdown()
    assert b["workers"] == 1 and b["first_start_s"] == starts[0]
    assert abs(b["run_s"] - sum(t["run_s"] for t in suite.timeline)) < 1e-9
    assert 0 <= b["idle_s"] < suite.wall_s
    summary = summary_dict(suite)
    assert summary["timeline"] == suite.timeline and summary["time_breakdown"] == b
    json.dumps(summary)  # the parent run's summary.json


def test_parallel_workers_start_the_longest_example_first(tmp_path: Path, write_benchmark: Any) -> None:
    """Expected a < b < c: two workers take c and b; a, the shortest, starts when one of them is done."""
    root = chapters(tmp_path, write_benchmark, "abc")
    seconds = {"a": 1.0, "b": 2.0, "c": 3.0}
    expected = {f"ch07:{n}:{v}": s for n, s in seconds.items() for v in ("baseline", "optimized")}
    suite = run_suite(select(discover(root)), cli_layer=FAST, workers=[{}, {}], expected_s=expected)
    first = {t["key"]: t for t in suite.timeline}
    ends = {n: first[f"ch07:{n}:optimized"]["end_s"] for n in "bc"}
    assert first["ch07:a:baseline"]["start_s"] >= min(ends.values()) - 1e-3
    assert {first[f"ch07:{n}:baseline"]["worker"] for n in "bc"} == {0, 1}
    assert [v.spec.key for v in suite.variants][:2] == ["ch07:a:baseline", "ch07:a:optimized"]  # example order kept


def test_without_durations_the_examples_start_in_order(tmp_path: Path, write_benchmark: Any) -> None:
    root = chapters(tmp_path, write_benchmark, "abc")
    suite = run_suite(select(discover(root)), cli_layer=FAST, workers=[{}, {}])
    first = {t["key"]: t for t in suite.timeline}
    assert first["ch07:c:baseline"]["start_s"] >= min(first[f"ch07:{n}:optimized"]["end_s"] for n in "ab") - 1e-3


def test_unknown_examples_count_as_longest(tmp_path: Path, write_benchmark: Any) -> None:
    (example,) = select(discover(chapters(tmp_path, write_benchmark, "a")))
    assert _expected(example, {"ch07:a:baseline": 1.0, "ch07:a:optimized": 2.5}) == 3.5
    assert _expected(example, {"ch07:a:baseline": 1.0}) == float("inf")


def test_the_expected_note_sums_the_last_runs_times_and_says_what_it_leaves_out(
    tmp_path: Path, write_benchmark: Any
) -> None:
    examples = select(discover(chapters(tmp_path, write_benchmark, "ab")))
    last = {"ch07:a:baseline": 100.0, "ch07:a:optimized": 80.0, "ch07:b:baseline": 60.0}
    assert expected_note(examples, {}) is None  # never run here: nothing to say
    assert expected_note(examples, last) == (
        "expected: ~4.0 min from these variants' last run here; 1 of 4 not timed before, "
        "not counted")  # fmt: skip
    note = expected_note(examples, last | {"ch07:b:optimized": 20.0}, workers=2, limit_s=90)
    assert note == ("expected: ~2.2 min from these variants' last run here, shared by 2 workers; "
                    "more than --suite-timeout 90 s: what has not finished by then is named, not run")  # fmt: skip
    assert "suite-timeout" not in (expected_note(examples, last, limit_s=300) or "")
    assert expected_note(examples, {"ch07:a:baseline": 30.0}) == (
        "expected: ~30 s from these variants' last run here; 3 of 4 not timed before, not "
        "counted")  # fmt: skip


def test_durations_round_trip_per_signature(tmp_path: Path, write_benchmark: Any) -> None:
    suite = run_suite(select(discover(chapters(tmp_path, write_benchmark, "a"))), cli_layer=FAST)
    path = tmp_path / "cache" / "durations.json"
    save_durations(path, "device=cpu", suite)
    got = load_durations(path, "device=cpu")
    assert set(got) == {"ch07:a:baseline", "ch07:a:optimized"} and all(v > 0 for v in got.values())
    assert load_durations(path, "device=cuda") == {}  # other settings, other times
    path.write_text("not json")
    assert load_durations(path, "device=cpu") == {}  # a hint only: a bad file is ignored
    save_durations(path, "device=cpu", suite)  # and replaced
    assert set(load_durations(path, "device=cpu")) == set(got)


def test_outputs_are_deleted_once_their_example_is_compared(tmp_path: Path, write_benchmark: Any) -> None:
    """A long suite keeps no output on disk beyond its example (one chapter-7 output is 1 GiB); with
    keep_workdir everything stays."""
    root = chapters(tmp_path, write_benchmark, "ab")
    work = tmp_path / "work"
    seen: dict[str, bool] = {}

    def on_result(result: Any, comparison: Any) -> None:
        if result.spec.key == "ch07:b:baseline":  # example a is finished and compared by now
            seen["a_outputs"] = (work / "ch07" / "a" / "optimized" / "outputs").exists()
            seen["b_outputs"] = (work / "ch07" / "b" / "baseline" / "outputs" / "output-0.bin").exists()

    suite = run_suite(select(discover(root)), cli_layer=FAST, workdir=work, on_result=on_result)
    assert all(c.verification.verified for c in suite.comparisons)  # compared before they went
    assert seen == {"a_outputs": False, "b_outputs": True}
    kept = tmp_path / "kept"
    run_suite(select(discover(root)), cli_layer=FAST, workdir=kept, keep_workdir=True)
    assert (kept / "ch07" / "a" / "optimized" / "outputs" / "output-0.bin").exists()


# ----------------------------------------------------------------------------- a whole example per worker

DOMINANT = {  # a alone (10 s) outlasts the share of one of two workers (14 / 2 = 7 s)
    "ch07:a:baseline": 5.0, "ch07:a:optimized": 5.0,
    "ch07:b:baseline": 1.0, "ch07:b:optimized": 1.0, "ch07:c:baseline": 1.0, "ch07:c:optimized": 1.0,
}  # fmt: skip
GPUS = [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]  # pinned workers; CPU benchmarks here


def test_a_dominant_example_still_runs_whole_on_one_worker(tmp_path: Path, write_benchmark: Any) -> None:
    """A pair shares its GPU, however long the example: a speedup is never taken across two GPUs."""
    root = chapters(tmp_path, write_benchmark, "abc")
    suite = run_suite(select(discover(root)), cli_layer=FAST, workers=GPUS, expected_s=DOMINANT)
    by = {t["key"]: t for t in suite.timeline}
    for example in "abc":
        assert by[f"ch07:{example}:baseline"]["worker"] == by[f"ch07:{example}:optimized"]["worker"]
    assert all(c.verification.verified for c in suite.comparisons)
