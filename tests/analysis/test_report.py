"""analysis/report.py and ``perflab report``: files built from the store, logged on the parent run."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis.report import CSV_COLUMNS, write_report
from perflab import cli
from tests.analysis.synthetic import Store, draw, log_suite, result

EXP = "report"


@pytest.fixture(scope="module")
def suite(store: Store) -> dict[str, Any]:
    """ch07: x verified (~2x), z faster (~3x) but NOT verified; ch08: w verified (~1.5x), v timed out."""
    samples = {
        "ch07:x:baseline": draw(2.0, 1),
        "ch07:x:optimized": draw(1.0, 2),
        "ch07:z:baseline": draw(3.0, 3),
        "ch07:z:optimized": draw(1.0, 4),
        "ch08:w:baseline": draw(1.5, 5),
        "ch08:w:optimized_fused": draw(1.0, 6),
        "ch08:v:baseline": draw(1.0, 7),
    }
    results = [result(k, s, work_bytes=4e6) for k, s in samples.items()]
    results.append(result("ch08:v:optimized", None, status="timeout"))
    parent, ids = log_suite(store, EXP, results, verified={"ch07:z:optimized": False})
    return {"parent": parent, "ids": ids, "samples": samples}


@pytest.fixture(scope="module")
def written(suite: dict[str, Any], store: Store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("report")
    report, where = write_report(None, out, store.uri)  # None: the latest completed suite = ours
    return {"report": report, "out": where}


def expected_geomean(samples: dict[str, list[float]]) -> float:
    """Computed here from the raw samples, independently of the harness: verified ok pairs only."""
    ratios = [
        statistics.median(samples["ch07:x:baseline"]) / statistics.median(samples["ch07:x:optimized"]),
        statistics.median(samples["ch08:w:baseline"]) / statistics.median(samples["ch08:w:optimized_fused"]),
    ]
    return math.prod(ratios) ** (1 / len(ratios))


def test_report_files_are_written(written: dict[str, Any], suite: dict[str, Any]) -> None:
    out: Path = written["out"]
    assert {p.name for p in out.iterdir()} == {
        "report.json", "report.md", "report.csv", "speedup.png", "roofline.png", "latency.png"
    }  # fmt: skip
    assert json.loads((out / "report.json").read_text())["overall"]["parent_run_id"] == suite["parent"]


def test_overall_summary_counts_and_geomean(written: dict[str, Any], suite: dict[str, Any]) -> None:
    o = json.loads((written["out"] / "report.json").read_text())["overall"]
    assert (o["chapters"], o["benchmarks"], o["variants"]) == (2, 4, 8)
    assert (o["succeeded"], o["failed"], o["skipped"]) == (7, 1, 0)
    assert (o["pairs"], o["pairs_verified"], o["pairs_counted"]) == (4, 2, 2)
    geomean = expected_geomean(suite["samples"])
    assert o["speedup_geomean"] == pytest.approx(geomean, rel=1e-9)
    s = suite["samples"]
    z = statistics.median(s["ch07:z:baseline"]) / statistics.median(s["ch07:z:optimized"])
    assert z > 2.5 and o["speedup_max"] < 2.5  # the unverified 3x is not the maximum
    assert o["speedup_min"] == pytest.approx(
        statistics.median(s["ch08:w:baseline"]) / statistics.median(s["ch08:w:optimized_fused"]), rel=1e-9
    )


def test_csv_rows_mark_unverified_pairs_not_counted(written: dict[str, Any]) -> None:
    rows = list(csv.DictReader(io.StringIO((written["out"] / "report.csv").read_text())))
    assert tuple(rows[0]) == CSV_COLUMNS
    by = {f"{r['chapter']}:{r['example']}:{r['variant']}": r for r in rows}
    assert set(by) == {"ch07:x:optimized", "ch07:z:optimized", "ch08:w:optimized_fused", "ch08:v:optimized"}
    assert by["ch07:z:optimized"]["verified"] == "False" and by["ch07:z:optimized"]["counted"] == "False"
    assert by["ch07:z:optimized"]["status"] == "mismatch"
    assert by["ch07:x:optimized"]["counted"] == "True"
    assert by["ch08:v:optimized"]["status"] == "failed" and by["ch08:v:optimized"]["optimized_median_ms"] == ""
    assert float(by["ch07:x:optimized"]["optimized_gbps"]) == pytest.approx(
        4e6 / (float(by["ch07:x:optimized"]["optimized_median_ms"]) / 1e3) / 1e9
    )


def test_csv_rows_hold_the_interval_their_verdict_rests_on() -> None:
    """ch16's prefix_sharing: 1.14x "no significant difference" (its interval 0.98-1.32 holds 1); report.csv held the
    speedup and the verdict, and the energy ratio's interval, but not the speedup's."""
    from analysis.report import report_csv

    row = dict.fromkeys(CSV_COLUMNS) | {"speedup": 1.137, "speedup_ci_low": 0.976, "speedup_ci_high": 1.324,
                                        "verdict": "no significant difference", "speedup_on": "TTFT"}  # fmt: skip
    (read,) = csv.DictReader(io.StringIO(report_csv({"chapters": {"ch16": [row]}})))
    assert (read["speedup"], read["speedup_ci_low"], read["speedup_ci_high"]) == ("1.137", "0.976", "1.324")


def test_markdown_has_chapter_tables_and_the_geomean(written: dict[str, Any], suite: dict[str, Any]) -> None:
    md = (written["out"] / "report.md").read_text()
    assert f"geomean {expected_geomean(suite['samples']):.3f}×" in md
    assert "## ch07" in md and "## ch08" in md
    z = next(line for line in md.splitlines() if line.startswith("| z |"))
    assert "(not counted)" in z and "| mismatch | no |" in z
    header = next(line for line in md.splitlines() if line.startswith("| example"))
    assert "| baseline median ms | optimized median ms |" in header and "| baseline GB/s |" in header  # ~1-3 ms
    assert "speedup on" not in header  # every pair on the median call time: no column to say so
    assert "ch08:v:optimized | timeout | measurement" in md


def test_report_is_logged_on_the_parent_run(written: dict[str, Any], suite: dict[str, Any], store: Store) -> None:
    names = {f.path for f in store.client.list_artifacts(suite["parent"])}
    assert {"report.json", "report.md", "report.csv"} <= names


def test_cli_report_and_bad_run_ids(
    written: dict[str, Any], suite: dict[str, Any], store: Store, tmp_path: Path
) -> None:
    args = ["report", "--run-id", suite["parent"], "--out", str(tmp_path), "--no-log", "--tracking-uri", store.uri]
    out = CliRunner().invoke(cli.app, args)
    assert out.exit_code == 0, out.output
    assert "4 pairs: " in out.output and "of the 2 verified ok pair(s)" in out.output
    assert (tmp_path / "report.md").is_file()
    variant = suite["ids"]["ch07:x:optimized"]
    bad = CliRunner().invoke(cli.app, ["report", "--run-id", variant, "--tracking-uri", store.uri])
    assert bad.exit_code == 2 and "is the variant run" in bad.output
    unknown = CliRunner().invoke(cli.app, ["report", "--run-id", "cafe0000", "--tracking-uri", store.uri])
    assert unknown.exit_code == 2 and "cafe0000" in unknown.output


def _stored(name: str, metrics: dict[str, float], **tags: str) -> Any:
    """A variant run as the store gives it back (``chapter:example:variant``), ok, with ``tags`` on top."""
    from bench.record import StoredRun

    chapter, example, variant = name.split(":")
    base = {"perflab.chapter": chapter, "perflab.example": example, "perflab.variant": variant,
            "perflab.status": "ok", "perflab.device": "cpu", "mlflow.parentRunId": "p"}  # fmt: skip
    return StoredRun(name, name, "0", "FINISHED", 0, {**base, **tags}, metrics)


def test_a_slower_or_not_significant_pair_is_shown_so_and_is_no_success() -> None:
    from analysis.report import build_report, report_markdown
    from bench.record import StoredRun

    run = _stored

    pair = {"perflab.pair_status": "ok", "perflab.verified": "true"}
    runs = [
        run("ch07:a:baseline", {"time_median_ms": 2.0}),
        run("ch07:a:optimized", {"time_median_ms": 2.5, "speedup": 0.8}, **pair, **{"perflab.significance": "slower"}),
        run("ch07:b:baseline", {"time_median_ms": 2.0}),
        run("ch07:b:optimized", {"time_median_ms": 1.98, "speedup": 1.01}, **pair,
            **{"perflab.significance": "no significant difference"}),
    ]  # fmt: skip
    parent = StoredRun("p", "ch07 on cpu", "0", "FINISHED", 0, {}, {})
    rep = build_report(parent, runs)
    o = rep["overall"]
    assert (o["pairs_faster"], o["pairs_slower"], o["pairs_no_difference"]) == (0, 1, 1)
    assert [x["verdict"] for x in rep["chapters"]["ch07"]] == ["slower", "no significant difference"]
    md = report_markdown(rep)
    assert "| 0.80× | slower |" in md and "| 1.01× | no significant difference |" in md
    assert "2 pairs: 1 slower, 1 no significant difference" in md  # every pair counted, none faster


def test_energy_per_call_is_reported_where_both_sides_measured_it() -> None:
    from analysis.report import build_report, report_csv, report_markdown
    from bench.record import StoredRun

    run = _stored

    pair = {"perflab.pair_status": "ok", "perflab.verified": "true", "perflab.significance": "faster"}
    energy = {"energy_per_call_mj": 80.0, "energy_ratio": 7.7, "energy_ratio_ci_low": 7.5, "energy_ratio_ci_high": 7.9}
    runs = [
        run("ch07:a:baseline", {"time_median_ms": 1.6, "energy_per_call_mj": 618.0}),
        run("ch07:a:optimized", {"time_median_ms": 0.12, "speedup": 12.8, **energy}, **pair),
        run("ch07:b:baseline", {"time_median_ms": 2.0}),
        run("ch07:b:optimized", {"time_median_ms": 1.0, "speedup": 2.0}, **pair),
    ]
    rep = build_report(StoredRun("p", "ch07 on H200", "0", "FINISHED", 0, {}, {}), runs)
    md = report_markdown(rep)
    assert "| a | optimized | 618 | 80.0 | 7.70× [7.50, 7.90] |" in md
    assert "| b | optimized |" in md.split("per call |")[0] and "| b | optimized |" not in md.split("per call |")[1]
    csv_lines = report_csv(rep).splitlines()
    assert csv_lines[0].endswith(
        ",baseline_energy_mj,optimized_energy_mj,energy_ratio,energy_ratio_ci_low,energy_ratio_ci_high"
    )
    assert csv_lines[1].endswith(",618.0,80.0,7.7,7.5,7.9") and csv_lines[2].endswith(",,,,,")


def test_a_speedup_on_a_generation_metric_shows_that_metrics_values() -> None:
    """A pair compared on its p99 TPOT: the report names the metric and reads both values from the two runs
    (tpot_p99_ms), beside the median call times; the CSV carries them too."""
    from analysis.report import build_report, report_csv, report_markdown
    from bench.record import StoredRun

    pair = {"perflab.pair_status": "ok", "perflab.verified": "true", "perflab.significance": "faster",
            "perflab.speedup_metric": "tpot_p99"}  # fmt: skip
    runs = [
        _stored("ch16:s:baseline", {"time_median_ms": 1541.0, "tpot_p99_ms": 30.0}),
        _stored("ch16:s:optimized", {"time_median_ms": 2741.0, "tpot_p99_ms": 10.0, "speedup": 3.0}, **pair),
        _stored("ch16:t:baseline", {"time_median_ms": 2.0}),
        _stored("ch16:t:optimized", {"time_median_ms": 1.0, "speedup": 2.0}, **{**pair, "perflab.speedup_metric":
                                                                                "time"}),
    ]  # fmt: skip
    rep = build_report(StoredRun("p", "ch16 on H200", "0", "FINISHED", 0, {}, {}), runs)
    md = report_markdown(rep)
    row = next(line for line in md.splitlines() if line.startswith("| s |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2:8] == ["1541", "2741", "TPOT p99", "30.0 ms", "10.0 ms", "3.00×"]
    t = next(line for line in md.splitlines() if line.startswith("| t |"))
    assert [c.strip() for c in t.split("|")[1:-1]][4:7] == ["call", "2.00 ms", "1.00 ms"]
    csv_lines = report_csv(rep).splitlines()
    header = csv_lines[0].split(",")
    s = dict(zip(header, csv_lines[1].split(","), strict=True))
    assert (s["speedup_on"], s["baseline_value"], s["optimized_value"]) == ("TPOT p99", "30.0", "10.0")


def test_a_skipped_variant_is_reported_with_why() -> None:
    """ "Variants not ok" gave a skipped variant's row an empty error cell (``| skipped | — |  |``) where the run's line
    said why (``needs a CUDA GPU (device is cpu), ...``: tag ``perflab.skip_reason``)."""
    from analysis.report import build_report, report_markdown
    from bench.record import StoredRun

    why = "needs a CUDA GPU (device is cpu), the Python module 'cuda.core'"
    skipped = {"perflab.status": "skipped", "perflab.skip_reason": why, "perflab.device": "auto"}
    runs = [_stored("ch07:a:baseline", {}, **skipped),
            _stored("ch07:a:optimized", {}, **skipped, **{"perflab.pair_status": "skipped"})]  # fmt: skip
    md = report_markdown(build_report(StoredRun("p", "ch07 on cpu", "0", "FINISHED", 0, {}, {}), runs))
    assert f"| ch07:a:baseline | skipped | — | {why} |" in md and f"| ch07:a:optimized | skipped | — | {why} |" in md


def test_the_devices_are_those_variants_ran_on_not_a_skipped_ones_auto() -> None:
    """A ch07 suite on a CPU host with two pairs skipped (no GPU) read "device(s): auto, cpu" in the report and in
    ``show``: a skipped variant's device tag is its config's "auto", where nothing ran."""
    from analysis.report import build_report, report_markdown
    from bench.record import StoredRun

    skipped = {"perflab.status": "skipped", "perflab.skip_reason": "needs a CUDA GPU", "perflab.device": "auto"}
    runs = [_stored("ch07:a:baseline", {}, **skipped), _stored("ch07:b:baseline", {"time_median_ms": 2.0})]
    md = report_markdown(build_report(StoredRun("p", "ch07 on cpu", "0", "FINISHED", 0, {}, {}), runs))
    assert "device(s): cpu\n" in md, md


def test_a_suite_without_a_verified_ok_pair_says_so_rather_than_dashes(store: Store, tmp_path: Path) -> None:
    """Every pair failed or mismatched: the Markdown read "geomean —×, max —×, min —×" and the command's line
    "geomean speedup of the 0 verified ok pair(s) —"; both say there is none."""
    results = [result("ch07:m:baseline", draw(2.0, 11)), result("ch07:m:optimized", draw(1.0, 12)),
               result("ch07:f:baseline", draw(1.0, 13)), result("ch07:f:optimized", None, status="failed")]  # fmt: skip
    parent, _ = log_suite(store, EXP, results, verified={"ch07:m:optimized": False})
    out = CliRunner().invoke(cli.app, ["report", "--run-id", parent, "--out", str(tmp_path), "--no-log",
                                       "--tracking-uri", store.uri])  # fmt: skip
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())  # the count line wraps at the console's width
    assert "no verified ok pair: no geomean speedup" in said and "—" not in out.output, out.output
    md = (tmp_path / "report.md").read_text()
    assert "- no verified ok pair: no speedup geomean, max or min" in md and "—×" not in md, md
