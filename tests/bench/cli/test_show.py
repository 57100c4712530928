"""``perflab show``: a suite's pairs from the store, in the units of their columns, each with its verdict; a run
that is not a suite is one line of error and exit status 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from typer.testing import CliRunner

from bench.define.result import Comparison, VariantResult
from bench.errors import PerflabError
from bench.record.tracking import Tracker
from perflab.cli import app
from tests.analysis.synthetic import Store, draw, pair, result

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, str, dict[str, str]]]:
    root = tmp_path_factory.mktemp("show")
    uri = f"sqlite:///{root}/mlflow.db"
    store = Store(uri=uri, root=root, client=MlflowClient(tracking_uri=uri))
    store.experiment("perflab")
    # CPU figures: 2.5 µs and 1.2 µs medians, 0.0004–0.014 GB/s (the issue's), one pair slower, one no different
    runs = {
        "ch07:fast:baseline": result("ch07:fast:baseline", draw(0.0025, 1), gpu=None, work_bytes=1e3),
        "ch07:fast:optimized": result("ch07:fast:optimized", draw(0.0012, 2), gpu=None, work_bytes=1e3),
        "ch07:slow:baseline": result("ch07:slow:baseline", draw(0.0020, 3), gpu=None, work_bytes=28.0),
        "ch07:slow:optimized": result("ch07:slow:optimized", draw(0.0025, 4), gpu=None, work_bytes=28.0),
        "ch07:same:baseline": result("ch07:same:baseline", draw(0.0030, 5), gpu=None),
        "ch07:same:optimized": result("ch07:same:optimized", draw(0.0030, 6), gpu=None),
    }
    intervals = {"fast": (1.9, 2.2, "faster"), "slow": (0.75, 0.85, "slower"), "same": (0.95, 1.05,
                 "no significant difference")}  # fmt: skip
    ids = {}
    with Tracker(experiment="perflab", tracking_uri=uri, run_name="ch07 on cpu") as t:
        for key, r in runs.items():
            cmp = None
            if not r.spec.is_baseline:
                low, high, significance = intervals[r.spec.example]
                cmp = pair(runs[f"ch07:{r.spec.example}:baseline"], r).model_copy(
                    update={"speedup_ci_low": low, "speedup_ci_high": high, "significance": significance}
                )
                if r.spec.example == "fast":  # the baseline over this pair's rounds, not all of the baseline's
                    cmp = cmp.model_copy(update={"baseline_median_ms": 0.0040, "baseline_value": 0.0040})
                if r.spec.example == "slow":  # a busy round left out: the optimized run holds it, the pair does not
                    cmp = cmp.model_copy(update={"optimized_median_ms": 0.0050, "optimized_value": 0.0050,
                                                 "rounds_left_out": [1]})  # fmt: skip
            ids[key] = t.log_variant(r, cmp)
        t.finish("# synthetic\n", {})
    yield store, t.parent_run_id, ids


def show(store: Store, *args: str) -> tuple[int, str]:
    out = CliRunner().invoke(app, ["show", "--tracking-uri", store.uri, *args], env={"COLUMNS": "80"})
    return out.exit_code, out.output


def test_show_tabulates_in_the_units_of_each_column(logged: tuple[Store, str, dict[str, str]]) -> None:
    store, parent, _ = logged
    code, text = show(store, "--run-id", parent)
    assert code == 0, text
    header = next(line for line in text.splitlines() if line.startswith("| example"))
    assert "baseline median µs" in header and "optimized median µs" in header  # not ms: 2.5 µs reads "0.0025"
    assert "baseline MB/s" in header  # 0.0004–0.4 GB/s: not "0.0"
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ch07:")}  # fmt: skip
    assert rows["ch07:slow"][5] == "slower" and rows["ch07:same"][5] == "no significant difference"
    assert rows["ch07:fast"][5] == "faster"
    assert all(row[8] not in ("0", "0.0") for row in rows.values())


def test_a_pair_shows_the_baseline_of_its_own_rounds(logged: tuple[Store, str, dict[str, str]]) -> None:
    """The baseline's run merges all its rounds, more than a pair that settled early ran beside it: a pair's row
    shows the baseline median its speedup was taken against (``perflab ab``'s table did, ``show`` and ``report``
    showed the baseline run's: 158 against 94.8 µs for one pair), in ``show`` and in the report alike."""
    from analysis.report import build_report
    from bench.record import campaign_of, read_run

    store, parent, _ = logged
    code, text = show(store, "--run-id", parent)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ch07:")}  # fmt: skip
    assert float(rows["ch07:fast"][2]) == pytest.approx(4.0) and float(rows["ch07:same"][2]) != pytest.approx(4.0)
    runs = campaign_of(read_run(parent, store.uri), store.uri).child_runs(store.uri)
    chapters = build_report(read_run(parent, store.uri), runs)["chapters"]
    report_rows = {r["example"]: r for rows_ in chapters.values() for r in rows_}
    assert report_rows["fast"]["baseline_median_ms"] == pytest.approx(0.0040)
    assert report_rows["fast"]["baseline_value"] == pytest.approx(0.0040)


def test_a_pair_shows_the_optimized_side_of_its_own_rounds(logged: tuple[Store, str, dict[str, str]]) -> None:
    """A round the host was busy in is left out of the pair's speedup, its two values and its medians, while the
    optimized variant's run keeps every round: a row took its baseline from the pair's rounds and its optimized side
    from the run's, two values the speedup never divided (``perflab run``'s table showed the pair's)."""
    from analysis.report import build_report
    from bench.record import campaign_of, read_run

    store, parent, _ = logged
    code, text = show(store, "--run-id", parent)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ch07:")}  # fmt: skip
    assert float(rows["ch07:slow"][3]) == pytest.approx(5.0), rows["ch07:slow"]
    assert float(rows["ch07:same"][3]) != pytest.approx(5.0)
    runs = campaign_of(read_run(parent, store.uri), store.uri).child_runs(store.uri)
    chapters = build_report(read_run(parent, store.uri), runs)["chapters"]
    report_rows = {r["example"]: r for rows_ in chapters.values() for r in rows_}
    assert report_rows["slow"]["optimized_median_ms"] == pytest.approx(0.0050)
    assert report_rows["slow"]["optimized_value"] == pytest.approx(0.0050)


def test_show_of_the_latest_suite_needs_no_id(logged: tuple[Store, str, dict[str, str]]) -> None:
    store, parent, _ = logged
    code, text = show(store)
    assert code == 0 and parent in text


def test_show_of_a_run_that_is_no_suite_is_one_line_and_fails(logged: tuple[Store, str, dict[str, str]]) -> None:
    store, _, ids = logged
    env = {**os.environ, "COLUMNS": "40"}  # narrow: the error stays one line all the same
    # both commands at once: each is mostly an interpreter's start-up
    procs = {bad: subprocess.Popen([sys.executable, "-m", "perflab", "show", "--tracking-uri", store.uri, "--run-id",
                                    run_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                   cwd=REPO, stdin=subprocess.DEVNULL)
             for bad, run_id in (("bogus", "bogus"), ("variant", ids["ch07:fast:optimized"]))}  # fmt: skip
    for bad, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and not out, (bad, out, err)
        lines = err.strip().splitlines()
        run_id = proc.args[proc.args.index("--run-id") + 1]  # type: ignore[union-attr]
        assert len(lines) == 1 and lines[0].startswith("error:") and run_id in lines[0], (bad, err)
        assert ("is the variant run" in lines[0]) == (bad == "variant"), (bad, err)


def test_a_run_id_prefix_of_8_hex_digits_is_taken_wherever_a_run_id_is(
    logged: tuple[Store, str, dict[str, str]], tmp_path: Path
) -> None:
    """The short id chart titles show (8 hex digits) was refused as "no MLflow run": a unique prefix of 8 or more
    digits names its run in ``show``, ``report``, ``regressions`` and ``expectations``; 7 digits are no run id."""
    from analysis.expectations import check
    from analysis.report import write_report
    from bench.record import read_run

    store, parent, ids = logged
    code, text = show(store, "--run-id", parent[:8])
    assert code == 0 and f"MLflow parent run `{parent}`" in text, text
    variant = ids["ch07:fast:optimized"]
    assert read_run(variant[:12], store.uri).run_id == variant
    assert write_report(parent[:8], tmp_path / "r", store.uri, log=False)[0]["overall"]["parent_run_id"] == parent
    assert check(parent[:8], tmp_path, 0.05, store.uri)[0] == parent
    res = CliRunner().invoke(app, ["regressions", "--run-id", variant[:8], "--tracking-uri", store.uri])
    assert res.exit_code in (0, 1) and "no MLflow run" not in res.output and variant in res.output, res.output
    refused = CliRunner().invoke(app, ["show", "--tracking-uri", store.uri, "--run-id", parent[:7]])
    said = str(refused.exception)  # perflab's main prints it as one line, exit status 2 (the test above)
    assert isinstance(refused.exception, PerflabError) and "no MLflow run" in said and "prefix of 8 or more" in said


def test_an_ambiguous_run_id_prefix_is_one_line_naming_how_many_runs_it_matches(
    logged: tuple[Store, str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs whose ids start with the digits given: neither is taken, the refusal one line with their count."""
    import bench.record.store as stored
    from bench.record import read_run

    store, parent, _ = logged
    real = stored.client(store.uri)
    twin = MlflowClient(tracking_uri=store.uri)  # the store, its search answering two runs for the prefix
    monkeypatch.setattr(twin, "search_runs", lambda *a, **kw: real.search_runs(*a, **kw) * 2)
    monkeypatch.setattr(stored, "client", lambda uri=None: twin)
    with pytest.raises(LookupError, match=rf"^run id prefix '{parent[:8]}' matches 2 runs in the store .*; give "
                                          "more of its digits$"):  # fmt: skip
        read_run(parent[:8], store.uri)
    refused = CliRunner().invoke(app, ["show", "--tracking-uri", store.uri, "--run-id", parent[:8]])
    said = str(refused.exception)  # perflab's main prints it as one line, exit status 2
    assert isinstance(refused.exception, PerflabError) and "\n" not in said and "matches 2 runs" in said, said
    assert read_run(parent, store.uri).run_id == parent  # a whole id is taken as it is


def test_show_names_a_speedup_on_ttft_and_its_two_values(logged: tuple[Store, str, dict[str, str]]) -> None:
    """A pair compared on TTFT: ``show`` reads both sides' ttft_median_ms and names the metric; the call medians
    keep their own columns."""
    from bench.define.result import Generation

    store, _, _ = logged
    gen = {"requests": 4, "tokens": 40, "arrival": "", "samples": 3, "steps": 10, "step_ms": {"median": 1.0},
           "speedup_metric": "ttft", "tokens_per_s": 100.0, "requests_per_s": 10.0}  # fmt: skip
    base = result("ch16:sched:baseline", [1541.0] * 5, gpu=None)
    base = base.model_copy(update={"generation": Generation(**gen, ttft_ms={"median": 350.0})})
    opt = result("ch16:sched:optimized", [2741.0] * 5, gpu=None)
    opt = opt.model_copy(update={"generation": Generation(**gen, ttft_ms={"median": 113.0})})
    cmp = pair(base, opt).model_copy(update={"speedup_metric": "ttft", "speedup": 350.0 / 113.0})
    with Tracker(experiment="perflab", tracking_uri=store.uri, run_name="ch16 on cpu") as t:
        t.log_variant(base, None)
        t.log_variant(opt, cmp)
        t.finish("# synthetic\n", {})
    code, text = show(store, "--run-id", t.parent_run_id)
    assert code == 0, text
    header = next(line for line in text.splitlines() if line.startswith("| example"))
    assert "| baseline median s | optimized median s | speedup on | baseline | optimized |" in header
    row = next(line for line in text.splitlines() if line.startswith("| ch16:sched"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2:8] == ["1.54", "2.74", "TTFT", "350 ms", "113 ms", "3.10×"]


def test_show_without_an_id_takes_a_suite_its_timeout_ended_and_says_so(tmp_path: Path) -> None:
    """A device call's suite ended by --suite-timeout is the only one in its store: ``show`` tabulates what
    finished, one line saying the suite was cut short; a later completed suite is taken before it."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    store = Store(uri=uri, root=tmp_path, client=MlflowClient(tracking_uri=uri))
    store.experiment("perflab")

    def suite(status: str) -> str:
        with Tracker(experiment="perflab", tracking_uri=uri, run_name=f"ch07 {status}") as t:
            base = result("ch07:a:baseline", draw(0.002, 1), gpu=None)
            opt = result("ch07:a:optimized", draw(0.001, 2), gpu=None)
            t.log_variant(base, None)
            t.log_variant(opt, pair(base, opt))
            t.finish("# synthetic\n", {})
        store.client.set_tag(t.parent_run_id, "perflab.suite_status", status)
        return t.parent_run_id

    cut = suite("timeout")
    code, text = show(store)
    assert code == 0 and cut in text and "ended at its --suite-timeout" in text and "| ch07:a |" in text
    done = suite("completed")
    code, text = show(store)
    assert code == 0 and done in text and "--suite-timeout" not in text


def test_a_suite_its_timeout_ended_before_any_variant_finished_is_passed_over_and_refused(tmp_path: Path) -> None:
    """``--suite-timeout`` before the first variant finished leaves a parent run with no variants: ``show`` took it
    as the latest suite and said "not a perflab suite", report, compare and expectations wrote empty tables
    (exit 0); ``show`` takes the suite before it, and each reader refuses it by id in one line saying why."""
    from analysis.expectations import check
    from analysis.readme import load_suite
    from analysis.regression import check_suite
    from analysis.report import write_report
    from analysis.versus import compare_suites

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    store = Store(uri=uri, root=tmp_path, client=MlflowClient(tracking_uri=uri))
    store.experiment("perflab")
    with Tracker(experiment="perflab", tracking_uri=uri, run_name="ch07 done") as t:
        base, opt = result("ch07:a:baseline", draw(0.002, 1), gpu=None), result("ch07:a:optimized", draw(0.001, 2))
        t.log_variant(base, None)
        t.log_variant(opt, pair(base, opt))
        t.finish("# synthetic\n", {})
    done = t.parent_run_id
    with Tracker(experiment="perflab", tracking_uri=uri, run_name="ch07 cut") as t:
        t.finish("# synthetic\n", {})
    cut = t.parent_run_id
    store.client.set_tag(cut, "perflab.suite_status", "timeout")
    store.client.log_metric(cut, "n_variants", 0)
    code, text = show(store)
    assert code == 0 and done in text and "| ch07:a |" in text, text
    said = f"suite {cut!r} ('ch07 cut') ended at its --suite-timeout before any variant finished: it has no pairs"
    out = CliRunner().invoke(app, ["show", "--tracking-uri", uri, "--run-id", cut])
    assert str(out.exception).startswith(said), out.exception
    for call in (lambda: write_report(cut, tmp_path / "r", uri, log=False), lambda: compare_suites(done, cut, uri),
                 lambda: check_suite(cut, tracking_uri=uri), lambda: load_suite(cut, uri),
                 lambda: check(cut, tmp_path, 0.05, uri)):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(said)):
            call()
    assert not (tmp_path / "r").exists()


def test_a_sweep_given_where_a_suite_is_wanted_is_one_line_naming_it(logged: tuple[Store, str, dict[str, str]],
                                                                      tmp_path: Path) -> None:  # fmt: skip
    """A ``perflab sweep run`` parent (tag perflab.kind=sweep) has no pairs: show, report, compare, regressions
    and readme refuse it in one line, not an empty table with exit status 0."""
    from analysis.readme import load_suite
    from analysis.regression import check_suite
    from analysis.report import write_report
    from analysis.versus import compare_suites
    from bench.errors import PerflabError

    store, parent, _ = logged
    with Tracker(experiment="perflab", tracking_uri=store.uri, run_name="sweep tracked",
                 tags={"perflab.kind": "sweep"}) as t:  # fmt: skip
        t.log_child("trial 0: bs=32", params={"batch_size": "32"}, metrics={"samples_per_s": 1.0},
                    tags={"perflab.kind": "sweep-trial"})  # fmt: skip
    sweep = t.parent_run_id
    out = CliRunner().invoke(app, ["show", "--tracking-uri", store.uri, "--run-id", sweep])
    assert isinstance(out.exception, PerflabError), out.output
    said = f"run {sweep!r} is a sweep (perflab sweep run) 'sweep tracked', not a perflab suite"
    assert str(out.exception).startswith(said), out.exception
    for call in (lambda: write_report(sweep, tmp_path / "r", store.uri, log=False),
                 lambda: compare_suites(parent, sweep, store.uri), lambda: check_suite(sweep, tracking_uri=store.uri),
                 lambda: load_suite(sweep, store.uri)):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(said)):
            call()
    assert not (tmp_path / "r").exists()  # no empty report written


def _rounds_pair(**work: Any) -> tuple[VariantResult, VariantResult, Comparison]:
    """A pair in 8 rounds whose round 1 was left out (host busy): its speedup, and the table ``perflab run`` printed
    (4.00 ms, ``7 rounds, max_rounds; round 1 left out: host busy``), over the 7 calm rounds; the optimized
    variant's own run over all of them (its median 30 ms: a starved round's calls). ``work``: ``result``'s."""
    base = result("ch07:r:baseline", [8.0] * 8, gpu=None, **work)
    opt = result("ch07:r:optimized", [4.0] * 3 + [30.0] * 5, gpu=None, **work)
    cmp = pair(base, opt).model_copy(update={
        "optimized_median_ms": 4.0, "speedup": 2.0, "speedup_ci_low": 1.9, "speedup_ci_high": 2.1,
        "significance": "faster", "round_speedups": [2.0] * 7, "rounds_stop": "max_rounds",
        "rounds_left_out": [1]})  # fmt: skip
    return base, opt, cmp


def _rounds_suite(tmp_path: Path, **work: Any) -> tuple[Store, str]:
    """``_rounds_pair`` logged as a suite."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    store = Store(uri=uri, root=tmp_path, client=MlflowClient(tracking_uri=uri))
    store.experiment("perflab")
    base, opt, cmp = _rounds_pair(**work)
    with Tracker(experiment="perflab", tracking_uri=uri, run_name="ch07 on cpu") as t:
        t.log_variant(base, None)
        t.log_variant(opt, cmp)
        t.finish("# synthetic\n", {})
    return store, t.parent_run_id


def _shown(store: Store, parent: str) -> dict[str, str]:
    code, text = show(store, "--run-id", parent)
    assert code == 0, text
    header = next(line for line in text.splitlines() if line.startswith("| example"))
    row = next(line for line in text.splitlines() if line.startswith("| ch07:r "))
    return dict(zip([c.strip() for c in header.split("|")[1:-1]], [c.strip() for c in row.split("|")[1:-1]],
                    strict=True))  # fmt: skip


def _reported(store: Store, parent: str) -> dict[str, Any]:
    from analysis.report import build_report
    from bench.record import campaign_of, read_run

    run = read_run(parent, store.uri)
    return build_report(run, campaign_of(run, store.uri).child_runs(store.uri))


def test_a_pair_in_rounds_shows_its_rounds_as_the_run_printed_them(tmp_path: Path) -> None:
    """``show`` and the report had no rounds at all: how many ran, why they stopped, which were left out (tags
    ``perflab.rounds``, ``perflab.rounds_left_out``); the report's CSV had no interval either."""
    import csv
    import io

    from analysis.report import report_csv, report_markdown

    store, parent = _rounds_suite(tmp_path)
    assert _shown(store, parent)["rounds"] == "7 max_rounds, round 1 left out: host busy"
    rep = _reported(store, parent)
    assert "| 7 max_rounds, round 1 left out: host busy |" in report_markdown(rep)
    (line,) = csv.DictReader(io.StringIO(report_csv(rep)))
    assert (line["speedup_ci_low"], line["speedup_ci_high"]) == ("1.9", "2.1")
    assert (line["rounds"], line["rounds_left_out"]) == ("7 max_rounds", "1")


def test_a_pair_with_a_round_left_out_shows_the_optimized_median_of_its_calm_rounds(tmp_path: Path) -> None:
    """The optimized side of a pair whose round was left out: ``show`` and the report showed the variant run's median
    over every round (30 ms beside the baseline's 8 ms and a speedup of 2.00x); they show the pair's, 4.00 ms, as
    the run's table did."""
    store, parent = _rounds_suite(tmp_path)
    cells = _shown(store, parent)
    assert (cells["baseline median ms"], cells["optimized median ms"]) == ("8.00", "4.00"), cells
    assert _reported(store, parent)["chapters"]["ch07"][0]["optimized_median_ms"] == pytest.approx(4.0)


def test_a_pair_with_a_round_left_out_shows_its_rates_at_the_median_it_shows(tmp_path: Path) -> None:
    """Beside the pair's median over its calm rounds, ``show``, the report, summary.md and the chapter README showed
    the rate and % of peak of the variant run's median over every round (3.41 ms beside 7.01 MB/s, which is 3.52
    ms's): 8 MB at the pair's 4 ms is 2 GB/s and 25 % of a stated 1 ms, not 0.27 GB/s and 3.3 % (30 ms's). The
    variant's own run keeps the rates of all its samples."""
    from analysis import readme
    from analysis.report import report_markdown
    from bench.define.result import SuiteResult
    from bench.record import read_run
    from bench.record.summary import summary_dict, summary_markdown

    work = {"work_bytes": 8e6, "ceiling": ("the PCIe link", 1.0, 80.0)}
    store, parent = _rounds_suite(tmp_path, **work)
    cells = _shown(store, parent)
    rates = [k for k in cells if k.endswith("B/s")]  # baseline, optimized: one unit
    assert float(cells[rates[1]]) / float(cells[rates[0]]) == pytest.approx(2.0, rel=0.01), cells  # 2 GB/s : 1 GB/s
    rep = _reported(store, parent)
    (row,) = rep["chapters"]["ch07"]
    assert (row["optimized_gbps"], row["optimized_pct_of_peak"]) == (pytest.approx(2.0), pytest.approx(25.0))
    assert row["baseline_gbps"] == pytest.approx(1.0)
    assert "| 25.0 |" in report_markdown(rep)
    suite = readme.load_suite(parent, store.uri)
    line = next(x for x in readme.results_section(suite, "ch07").splitlines() if x.startswith("| r "))
    assert "| 2.00 GB/s | 25.0 % of the PCIe link |" in line, line
    own = read_run(row["run_id"], store.uri).metrics  # the variant's run: its median over every round, and its rates
    assert (own["achieved_gbps"], own["pct_of_peak"]) == (pytest.approx(8e6 / 30e-3 / 1e9), pytest.approx(100 / 30))
    base, opt, cmp = _rounds_pair(**work)
    summary = summary_dict(SuiteResult(variants=[base, opt], comparisons=[cmp], unpaired=[], wall_s=1.0))
    assert summary["pairs"][0]["optimized_achieved_gbps"] == pytest.approx(2.0)
    md_row = next(x for x in summary_markdown(summary).splitlines() if x.startswith("| ch07:r "))
    assert "| 4.00 |" in md_row and "| 2.00 |" in md_row, md_row  # GB/s at the 4.00 ms it shows


def test_show_names_the_devices_variants_ran_on_not_a_skipped_ones_auto(tmp_path: Path) -> None:
    """ch07 on a CPU host, two pairs skipped (no GPU): ``show`` read "device(s): auto, cpu", a skipped variant's
    device tag being its config's "auto"."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    store = Store(uri=uri, root=tmp_path, client=MlflowClient(tracking_uri=uri))
    store.experiment("perflab")
    gone = {"device": None, "skip_reason": "needs a CUDA GPU", "error": None, "failed_stage": None}
    skipped = [result(f"ch07:s:{v}", None, gpu=None, status="skipped").model_copy(update=gone)
               for v in ("baseline", "optimized")]  # fmt: skip
    ran = [result(f"ch07:r:{v}", draw(1.0, n), gpu=None) for n, v in enumerate(("baseline", "optimized"))]
    with Tracker(experiment="perflab", tracking_uri=uri, run_name="ch07 on cpu") as t:
        for base, opt in (skipped, ran):
            t.log_variant(base, None)
            t.log_variant(opt, pair(base, opt))
        t.finish("# synthetic\n", {})
    code, text = show(store, "--run-id", t.parent_run_id)
    assert code == 0 and f"MLflow parent run `{t.parent_run_id}`; device(s): cpu\n" in text, text
