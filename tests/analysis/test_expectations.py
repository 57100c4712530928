"""analysis/expectations.py and ``perflab expectations``: proof of benefit against reviewed files."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.entities import Metric
from typer.testing import CliRunner

from analysis.expectations import check, update
from bench.record.tracking import Tracker
from perflab import cli
from tests.analysis.synthetic import Store, draw, log_suite, pair, result

EXPECTED = {  # written by hand for the test, as a reviewer would commit them
    "hardware": "NVIDIA H100 80GB HBM3",
    "chapter": "ch07",
    "examples": {
        "good": {"optimized": {"speedup": 2.0, "run_id": "r-good"}},
        "slow": {"optimized": {"speedup": 2.0, "run_id": "r-slow"}},
        "wrong": {"optimized": {"speedup": 3.0, "run_id": "r-wrong"}},
        "hung": {"optimized": {"speedup": 1.5, "run_id": "r-hung"}},
    },
}


@pytest.fixture(scope="module")
def suite(store: Store) -> dict[str, Any]:
    """good ~2x (expected 2x), slow ~1.5x (expected 2x), wrong ~3x unverified, hung timed out, new ~2x
    without an expectation."""
    results = [
        result("ch07:good:baseline", draw(2.0, 1)), result("ch07:good:optimized", draw(1.0, 2)),
        result("ch07:slow:baseline", draw(1.5, 3)), result("ch07:slow:optimized", draw(1.0, 4)),
        result("ch07:wrong:baseline", draw(3.0, 5)), result("ch07:wrong:optimized", draw(1.0, 6)),
        result("ch07:hung:baseline", draw(1.0, 7)), result("ch07:hung:optimized", None, status="timeout"),
        result("ch07:new:baseline", draw(2.0, 8)), result("ch07:new:optimized", draw(1.0, 9)),
    ]  # fmt: skip
    parent, ids = log_suite(store, "expectations", results, verified={"ch07:wrong:optimized": False})
    for key in ("ch07:good:optimized", "ch07:slow:optimized", "ch07:new:optimized"):  # decided, as rounds decide
        store.client.set_tag(ids[key], "perflab.significance", "faster")
    return {"parent": parent, "ids": ids}


def _expectations(tmp_path: Path, chapter: str, doc: dict[str, Any]) -> Path:
    """An expectations root under ``tmp_path`` holding ``doc`` as the H100's ``chapter``."""
    path = tmp_path / "expectations" / "nvidia-h100-80gb-hbm3" / f"{chapter}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(doc))
    return tmp_path / "expectations"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return _expectations(tmp_path, "ch07", EXPECTED)


def test_check_gives_each_status(suite: dict[str, Any], root: Path, store: Store) -> None:
    parent, rows = check(suite["parent"], root, 0.05, store.uri)
    assert parent == suite["parent"]
    by = {r.example: r for r in rows}
    assert {e: r.status for e, r in by.items()} == {
        "good": "pass", "slow": "regressed", "wrong": "failed", "hung": "failed", "new": "needs-work"
    }  # fmt: skip
    assert by["slow"].expected == 2.0 and by["slow"].speedup == pytest.approx(1.5, rel=0.02)
    assert "by 2" in by["slow"].notes  # ~25 % short
    assert "judged on the point speedup" in by["slow"].notes  # its pair logged no interval
    assert "not verified" in by["wrong"].notes and "timeout" in by["hung"].notes
    # a looser tolerance lets the 1.5x through: the threshold is really applied
    assert {r.example: r.status for r in check(suite["parent"], root, 0.3, store.uri)[1]}["slow"] == "pass"


def test_cli_check_writes_proof_of_benefit_csv(suite: dict[str, Any], root: Path, store: Store, tmp_path: Path) -> None:
    args = ["expectations", "check", "--run-id", suite["parent"], "--dir", str(root), "--out", str(tmp_path),
            "--tracking-uri", store.uri]  # fmt: skip
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 1, res.output  # regressed and failed rows
    rows = list(csv.DictReader(io.StringIO((tmp_path / "proof_of_benefit.csv").read_text())))
    assert tuple(rows[0])[:6] == ("chapter", "example", "variant", "status", "speedup", "expected")
    assert sorted(r["status"] for r in rows) == ["failed", "failed", "needs-work", "pass", "regressed"]
    assert "proof_of_benefit.csv" in {f.path for f in store.client.list_artifacts(suite["parent"])}


def test_update_refuses_unverified_and_failed(suite: dict[str, Any], tmp_path: Path, store: Store) -> None:
    for target in ("ch07:wrong", "ch07:hung"):
        with pytest.raises(ValueError, match="refusing"):
            update(suite["parent"], target, tmp_path, store.uri)
    assert not list(tmp_path.rglob("*.yaml"))
    res = CliRunner().invoke(cli.app, ["expectations", "update", "--run-id", suite["parent"], "--example",
                                       "ch7:wrong", "--dir", str(tmp_path), "--tracking-uri", store.uri])  # fmt: skip
    assert res.exit_code == 2 and "refusing" in res.output


@pytest.mark.parametrize("target", ["transpose", "chx:transpose", "ch7:", ":transpose", "chapter7:transpose"])
def test_update_names_a_malformed_example_and_the_form_it_takes(tmp_path: Path, target: str) -> None:
    """``chx:transpose`` answered "invalid literal for int() with base 10: 'x'"."""
    with pytest.raises(ValueError, match=rf"^--example takes chapter:example, e\.g\. ch07:transpose \(or "
                                         rf"7:transpose\), but got {re.escape(repr(target))}$"):  # fmt: skip
        update("cafe", target, tmp_path)


def test_a_dir_that_is_no_expectations_root_is_refused_naming_it(suite: dict[str, Any], tmp_path: Path,
                                                                  store: Store) -> None:  # fmt: skip
    """A mistyped --dir (or the default ``expectations`` read from another directory) gave every row "needs-work"
    and exit status 0; a file as --dir made ``update`` a traceback."""
    missing, file = tmp_path / "expectatons", tmp_path / "x.yaml"
    file.write_text("")
    with pytest.raises(ValueError, match=rf"^--dir {re.escape(repr(str(missing)))}: no such directory; pass the "
                                         r"expectations root, a folder per hardware key"):  # fmt: skip
        check(suite["parent"], missing, 0.05, store.uri)
    with pytest.raises(ValueError, match=rf"^--dir {re.escape(repr(str(file)))}: a file, not a directory"):
        check(suite["parent"], file, 0.05, store.uri)
    with pytest.raises(ValueError, match=rf"^--dir {re.escape(repr(str(file)))}: cannot write .* there"):
        update(suite["parent"], "ch07:good", file, store.uri)
    assert not missing.exists()


def test_update_records_the_commit_perflab_stated(suite: dict[str, Any], tmp_path: Path, store: Store) -> None:
    """A copied tree's stale .git fools MLflow's commit tag; the suite's perflab.git_commit wins."""
    before = store.client.get_run(suite["parent"]).data.tags.get("perflab.git_commit")
    store.client.set_tag(suite["parent"], "perflab.git_commit", "stated0123")
    try:
        doc = yaml.safe_load(update(suite["parent"], "ch07:good", tmp_path, store.uri)[0].read_text())
    finally:
        if before is None:
            store.client.delete_tag(suite["parent"], "perflab.git_commit")
        else:
            store.client.set_tag(suite["parent"], "perflab.git_commit", before)
    assert doc["examples"]["good"]["optimized"]["commit"] == "stated0123"


def test_update_writes_exactly_one_example(suite: dict[str, Any], root: Path, store: Store) -> None:
    path, skipped = update(suite["parent"], "ch7:slow", root, store.uri)
    doc = yaml.safe_load(path.read_text())
    assert skipped == []
    assert path == root / "nvidia-h100-80gb-hbm3" / "ch07.yaml"
    assert doc["examples"]["good"] == EXPECTED["examples"]["good"]  # others untouched
    assert doc["examples"]["hung"] == EXPECTED["examples"]["hung"]
    slow = doc["examples"]["slow"]["optimized"]
    run = store.client.get_run(suite["ids"]["ch07:slow:optimized"])
    assert slow["speedup"] == run.data.metrics["speedup"]  # exact, not rounded or clamped
    assert slow["run_id"] == run.info.run_id and slow["parent_run_id"] == suite["parent"]
    assert set(doc["examples"]) == set(EXPECTED["examples"])
    parent_tags = store.client.get_run(suite["parent"]).data.tags
    assert slow["commit"] == parent_tags.get("perflab.git_commit", run.data.tags.get("mlflow.source.git.commit"))
    assert slow["speedup_metric"] == "time"  # what it divides: the call time here
    # now recorded from this very run, the same suite passes
    assert {r.example: r.status for r in check(suite["parent"], root, 0.05, store.uri)[1]}["slow"] == "pass"


def test_an_expectation_on_another_metric_is_no_expectation(suite: dict[str, Any], tmp_path: Path,
                                                            store: Store) -> None:  # fmt: skip
    """An expectation whose speedup is on TTFT says nothing of a speedup on the call time: needs-work, naming both;
    one without a metric (files written before it) is judged as before."""
    doc = {**EXPECTED, "examples": {**EXPECTED["examples"],
                                    "good": {"optimized": {"speedup": 2.0, "speedup_metric": "ttft"}}}}  # fmt: skip
    rows = {r.example: r for r in check(suite["parent"], _expectations(tmp_path, "ch07", doc), 0.05, store.uri)[1]}
    assert rows["good"].status == "needs-work", rows["good"].notes
    assert "on ttft, this run's on time" in rows["good"].notes
    assert rows["slow"].status == "regressed"  # no metric recorded: as before


def test_update_records_only_pairs_decided_faster_and_names_each_it_skips(store: Store, tmp_path: Path) -> None:
    """``update`` took 1.13x [0.91, 1.42] "no significant difference" as an expectation: a pair whose verdict is not
    ``faster`` is left out (its entry, if any, kept), a line naming it and its verdict; with none faster, nothing is
    written and the command says why in one line."""
    results = [result("ch07:mixed:baseline", draw(2.0, 11)), result("ch07:mixed:optimized", draw(1.0, 12)),
               result("ch07:mixed:optimized_b", draw(1.77, 13)), result("ch07:mixed:optimized_c", draw(1.0, 14)),
               result("ch07:flat:baseline", draw(1.13, 15)), result("ch07:flat:optimized", draw(1.0, 16))]  # fmt: skip
    parent, ids = log_suite(store, "decided", results)
    said = {"ch07:mixed:optimized": ("faster", 1.9, 2.1), "ch07:mixed:optimized_b": ("no significant difference",
            0.91, 1.42), "ch07:flat:optimized": ("no significant difference", 0.91, 1.42)}  # fmt: skip
    for key, (significance, low, high) in said.items():  # optimized_c: no interval logged ("no interval")
        store.client.set_tag(ids[key], "perflab.significance", significance)
        store.client.log_batch(ids[key], metrics=[Metric("speedup_ci_low", low, 0, 0),
                                                  Metric("speedup_ci_high", high, 0, 0)])  # fmt: skip
    kept = {"optimized_b": {"speedup": 1.5, "run_id": "r-reviewed"}}
    root = _expectations(tmp_path, "ch07", {**EXPECTED, "examples": {"mixed": kept}})
    path, skipped = update(parent, "ch07:mixed", root, store.uri)
    assert [line.split(":")[2] for line in skipped] == ["optimized_b", "optimized_c"], skipped
    assert re.fullmatch(r"ch07:mixed:optimized_b: no significant difference \(1\.1\d× \[0\.91, 1\.42\]\)", skipped[0])
    assert "ch07:mixed:optimized_c: no interval" in skipped[1]
    mixed = yaml.safe_load(path.read_text())["examples"]["mixed"]
    assert set(mixed) == {"optimized", "optimized_b"} and mixed["optimized_b"] == kept["optimized_b"]
    assert mixed["optimized"]["run_id"] == ids["ch07:mixed:optimized"]
    args = ["expectations", "update", "--run-id", parent, "--dir", str(root), "--tracking-uri", store.uri]
    res = CliRunner().invoke(cli.app, [*args, "--example", "ch07:mixed"], env={"COLUMNS": "200"})
    lines = [line for line in res.output.splitlines() if line.startswith("skipped ")]
    assert res.exit_code == 0 and len(lines) == 2 and "ch07:mixed:optimized_b: no significant difference" in lines[0]
    before = path.read_text()
    with pytest.raises(ValueError, match=r"nothing recorded from suite .*: no pair of ch07:flat is faster \("
                                         r"ch07:flat:optimized: no significant difference"):  # fmt: skip
        update(parent, "ch07:flat", root, store.uri)
    res = CliRunner().invoke(cli.app, [*args, "--example", "ch07:flat"], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "no pair of ch07:flat is faster" in res.output, res.output
    assert path.read_text() == before and "flat" not in yaml.safe_load(before)["examples"]


@pytest.mark.parametrize(("text", "said"), [
    ("examples:\n  good:\n    optimized: {speedp: 2.0}\n",
     r": examples\.good\.optimized: unknown key 'speedp' \(did you mean 'speedup'\?\); accepted: commit, "
     r"parent_run_id, pct_of_peak, run_id, speedup, speedup_metric$"),
    ("exampels:\n  good: {optimized: {speedup: 2.0}}\n",
     r": unknown key 'exampels' \(did you mean 'examples'\?\); accepted: chapter, examples, hardware$"),
    ("examples:\n  good: {optimized: {speedup: fast}}\n",
     r": examples\.good\.optimized\.speedup is 'fast'; accepted: a positive number$"),
    ("examples:\n  good: [unclosed\n", r"' is not valid YAML: while parsing a flow sequence at line 2, column 9: "
                                       r"expected ',' or '\]', but got '<stream end>' at line 3, column 1; expected "
                                       r"a mapping with an 'examples' mapping; fix or delete the file$"),
    ("chapter: ch08\nexamples: {}\n", r": chapter 'ch08' in the file of ch07; fix or delete the file$"),
])  # fmt: skip
def test_a_bad_expectation_file_is_one_line_naming_the_key_and_what_is_accepted(
    suite: dict[str, Any], tmp_path: Path, store: Store, text: str, said: str
) -> None:
    """A typo'd key left its variant without an expectation (a typo'd ``speedup``: the row passed, "expected —");
    a bad value or bad YAML ended in a traceback. Each is one line naming the file, the key and what is accepted."""
    root = _expectations(tmp_path, "ch07", {})
    path = root / "nvidia-h100-80gb-hbm3" / "ch07.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(str(path)) + said):
        check(suite["parent"], root, 0.05, store.uri)
    res = CliRunner().invoke(cli.app, ["expectations", "check", "--run-id", suite["parent"], "--dir", str(root),
                                       "--out", str(tmp_path), "--no-log", "--tracking-uri", store.uri])  # fmt: skip
    assert res.exit_code == 2 and "Traceback" not in res.output and str(path) in res.output, res.output


def test_a_skipped_pair_is_skipped_with_its_reason_not_failed(store: Store, tmp_path: Path) -> None:
    """A pair skipped for what the host lacks (a second GPU) read "failed" and made the check exit 1, though
    ``perflab run`` counts it skipped and exits 0: it is ``skipped``, its reason in the notes, and no failure."""
    from bench.measure.compare import compare

    skipped = [result(f"ch02:peer:{side}", None).model_copy(update={
        "status": "skipped", "error": None, "failed_stage": None, "skip_reason": "needs 2 GPUs (1 visible)"})
               for side in ("baseline", "optimized")]  # fmt: skip
    store.experiment("skipped")
    with Tracker(experiment="skipped", tracking_uri=store.uri, run_name="perflab run") as t:
        t.log_variant(skipped[0], None)
        t.log_variant(skipped[1], compare(skipped[0], skipped[1]))
        t.finish("# synthetic\n", {})
    root = _expectations(tmp_path, "ch02", {"examples": {"peer": {"optimized": {"speedup": 2.0}}}})
    (row,) = check(t.parent_run_id, root, 0.05, store.uri)[1]
    assert (row.status, row.speedup) == ("skipped", None) and "needs 2 GPUs (1 visible)" in row.notes, row
    res = CliRunner().invoke(cli.app, ["expectations", "check", "--run-id", t.parent_run_id, "--dir", str(root),
                                       "--out", str(tmp_path), "--no-log", "--tracking-uri", store.uri])  # fmt: skip
    assert res.exit_code == 0 and "0 failed, 1 skipped" in " ".join(res.output.split()), res.output


# --- the interval rule: regressed only when the run's 95 % interval of the speedup is below the floor ----------

INTERVAL_EXPECTED = {
    "hardware": "NVIDIA H100 80GB HBM3",
    "chapter": "ch08",
    "examples": {name: {"optimized": {"speedup": 2.0, "run_id": f"r-{name}"}}
                 for name in ("noisy", "slower", "edge", "bare_low", "bare_ok")}
    | {name: {"optimized": {"speedup": 2.0, "pct_of_peak": 100.0, "run_id": f"r-{name}"}}
       for name in ("offpeak", "atpeak", "offpeak_wall")},
}  # fmt: skip
# example: (point speedup, its logged 95 % interval or None, the optimized side's share of a stated ceiling);
# offpeak_wall's optimized side is timed on the host's clock (a wall-clock time on a GPU: no roofline binds it)
INTERVAL_CASES = {
    "noisy": (1.8, (1.6, 1.95), None),  # point below the floor 1.9, interval reaching it: noise, passes
    "slower": (1.5, (1.4, 1.6), None),  # the whole interval below 1.9: regressed
    "edge": (1.85, (1.8, 1.89), None),  # the interval's top just under the floor: regressed
    "bare_low": (1.8, None, None),  # no interval logged: the point rule, and its row says so
    "bare_ok": (1.95, None, None),
    "offpeak": (2.0, (1.9, 2.1), 0.9),  # speedup as expected, 90 % of the ceiling against 100 %: regressed
    "atpeak": (2.0, (1.9, 2.1), 0.97),  # 97 % against 100 % is within the 5 %
    "offpeak_wall": (2.0, (1.9, 2.1), 0.9),  # as offpeak, but wall-clock: its pct_of_peak is not judged
}
OPT_MS = 1.0


def flat(median_ms: float) -> list[float]:
    return [median_ms] * 20


@pytest.fixture(scope="module")
def interval_suite(store: Store) -> str:
    """A ch08 suite whose optimized runs log the speedups and 95 % intervals of INTERVAL_CASES, as the harness's
    comparison logs them (``speedup_ci_low``/``speedup_ci_high``)."""
    results, intervals = [], {}
    for name, (speedup, interval, share) in INTERVAL_CASES.items():
        ceiling = None if share is None else ("a stated ceiling", share * OPT_MS, 80.0)
        work = 1e6 if share is not None else None
        opt = result(f"ch08:{name}:optimized", flat(OPT_MS), work_bytes=work, ceiling=ceiling)
        if name.endswith("_wall"):
            assert opt.timing is not None
            opt = opt.model_copy(update={"timing": opt.timing.model_copy(update={"mode": "cpu"})})
        results += [result(f"ch08:{name}:baseline", flat(speedup * OPT_MS), work_bytes=work, ceiling=ceiling), opt]
        intervals[f"ch08:{name}:optimized"] = interval
    if store.client.get_experiment_by_name("intervals") is None:
        store.experiment("intervals")
    baselines = {r.spec.target: r for r in results if r.spec.is_baseline}
    with Tracker(experiment="intervals", tracking_uri=store.uri, run_name="perflab run", host_manifest={}) as t:
        for r in sorted(results, key=lambda r: not r.spec.is_baseline):
            cmp = None
            if not r.spec.is_baseline:
                low, high = intervals[r.spec.key] or (None, None)
                cmp = pair(baselines[r.spec.target], r).model_copy(
                    update={"speedup_ci_low": low, "speedup_ci_high": high}
                )
            t.log_variant(r, cmp)
        t.finish("# synthetic\n", {})
    return t.parent_run_id


@pytest.fixture
def interval_root(tmp_path: Path) -> Path:
    return _expectations(tmp_path, "ch08", INTERVAL_EXPECTED)


def test_check_judges_the_runs_interval_not_its_point(interval_suite: str, interval_root: Path, store: Store) -> None:
    """A noisy run whose interval reaches the floor passes; a run whose whole interval is below it is regressed."""
    by = {r.example: r for r in check(interval_suite, interval_root, 0.05, store.uri)[1]}
    assert {e: r.status for e, r in by.items()} == {
        "noisy": "pass", "slower": "regressed", "edge": "regressed", "bare_low": "regressed", "bare_ok": "pass",
        "offpeak": "regressed", "atpeak": "pass", "offpeak_wall": "pass",
    }  # fmt: skip
    noisy = by["noisy"]
    assert noisy.speedup == pytest.approx(1.8) and noisy.speedup < 2.0 * 0.95  # the point rule would flag it
    assert (noisy.speedup_ci_low, noisy.speedup_ci_high) == (1.6, 1.95)
    assert "reaches 1.950" in noisy.notes and "not shown slower" in noisy.notes
    assert "interval ends at 1.600" in by["slower"].notes and "by 25.0 %" in by["slower"].notes
    assert "interval ends at 1.890" in by["edge"].notes
    for bare in ("bare_low", "bare_ok"):  # no interval: the point rule, said in the row
        assert "no speedup_ci_high logged: judged on the point speedup" in by[bare].notes
        assert by[bare].speedup_ci_high is None
    assert "pct_of_peak 90.0 < 100.0" in by["offpeak"].notes  # the pct_of_peak rule as before
    assert by["atpeak"].pct_of_peak == pytest.approx(97.0)
    wall = by["offpeak_wall"]  # 90 % against 100 %, but the roofline does not bind a wall-clock time
    assert wall.pct_of_peak == pytest.approx(90.0)
    assert "pct_of_peak not judged: a wall-clock time on a GPU" in wall.notes


def test_check_tolerance_still_sets_the_floor(interval_suite: str, interval_root: Path, store: Store) -> None:
    """The tolerance moves the floor the interval is held against: none, then 30 %."""
    strict = {r.example: r.status for r in check(interval_suite, interval_root, 0.0, store.uri)[1]}
    assert strict["noisy"] == "regressed" and strict["atpeak"] == "regressed"  # 1.95 < 2.0; 97 % < 100 %
    assert strict["offpeak_wall"] == "pass"  # its interval reaches 2.0; its 90 % is not judged
    loose = {r.example: r.status for r in check(interval_suite, interval_root, 0.3, store.uri)[1]}
    assert loose["slower"] == "pass" and loose["edge"] == "pass" and loose["offpeak"] == "pass"  # floor 1.4, 70 %


def test_cli_check_prints_and_writes_the_interval(interval_suite: str, interval_root: Path, store: Store,
                                                  tmp_path: Path) -> None:  # fmt: skip
    args = ["expectations", "check", "--run-id", interval_suite, "--dir", str(interval_root), "--out",
            str(tmp_path), "--no-log", "--tracking-uri", store.uri]  # fmt: skip
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 1, res.output
    line = next(line for line in res.output.splitlines() if "ch08:noisy:optimized" in line)
    assert line.startswith("pass") and "1.800x [1.600, 1.950]" in line
    rows = {r["example"]: r for r in csv.DictReader(io.StringIO((tmp_path / "proof_of_benefit.csv").read_text()))}
    assert float(rows["slower"]["speedup_ci_high"]) == 1.6 and rows["bare_ok"]["speedup_ci_high"] == ""
