"""analysis/versus.py and ``perflab compare SUITE_A SUITE_B``: two suites pair by pair, each speedup with its
interval, whether they differ, geomeans over the pairs both suites verified."""

from __future__ import annotations

import math
from typing import Any

import pytest
from typer.testing import CliRunner

import analysis.cli
from analysis.versus import compare_suites, difference
from bench.record.tracking import Tracker
from perflab import cli
from tests.analysis.synthetic import Store, draw, pair, result

EXP = "versus"


def row(speedup: float, low: float | None, high: float | None, counted: bool = True, on: str = "call",
        verdict: str = "faster") -> dict[str, Any]:  # fmt: skip
    return {"speedup": speedup, "speedup_ci_low": low, "speedup_ci_high": high, "counted": counted,
            "speedup_on": on, "verdict": verdict}  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (row(2.0, 1.9, 2.1), row(3.0, 2.85, 3.15), "B faster"),
        (row(3.0, 2.85, 3.15), row(2.0, 1.9, 2.1), "B slower"),
        (row(2.0, 1.8, 2.2), row(2.1, 1.9, 2.3), "no significant difference"),  # overlapping, close
        (row(2.0, 1.5, 2.6), row(1.0, 0.7, 1.4), "B slower"),  # 2x apart: beyond two wide intervals
        (row(2.0, None, None), row(3.0, 2.9, 3.1), "no interval on A"),
        (row(2.0, 1.9, 2.1), row(3.0, None, None), "no interval on B"),
        (row(2.0, None, None), row(3.0, None, None), "no interval on A, B"),
        (row(2.0, 1.9, 2.1, counted=False, verdict="mismatch"), row(3.0, 2.9, 3.1), "A mismatch"),
        (row(2.0, 1.9, 2.1), row(3.0, 2.9, 3.1, counted=False, verdict="failed"), "B failed"),
        (
            row(2.0, None, None, counted=False, verdict="failed"),
            row(3.0, None, None, counted=False, verdict="failed"),
            "A failed, B failed",
        ),  # both sides said: the one named first is not the only one that failed
        (row(2.0, 1.9, 2.1), row(3.0, 2.9, 3.1, on="TTFT"), "different metrics (call, TTFT)"),
    ],
)
def test_difference_of_two_speedups(a: dict[str, Any], b: dict[str, Any], want: str) -> None:
    assert difference(a, b) == want


def test_a_difference_within_the_noise_threshold_is_no_verdict() -> None:
    """Two runs of the same suite whose speedups differ by 0.4 % with intervals of ±0.05 %: beyond their intervals,
    inside the ±1 % noise threshold (as a pair's own speedup would be); with the threshold at 0, "B faster"."""
    a, b = row(2.0, 1.999, 2.001), row(2.008, 2.007, 2.009)
    assert difference(a, b) == "no significant difference"
    assert difference(a, b, noise_threshold=0.0) == "B faster"
    assert difference(a, row(2.1, 2.099, 2.101)) == "B faster"  # 5 %: beyond the band


def test_intervals_that_overlap_can_still_differ() -> None:
    """[1.90, 2.30] and [2.22, 2.64] overlap, yet 2.09 and 2.42 differ at 5 % and beyond the noise threshold: the
    test is on the difference, not on the overlap (which would be a test at about 0.6 %)."""
    assert difference(row(2.09, 1.90, 2.30), row(2.42, 2.22, 2.64)) == "B faster"


def test_pairs_in_rounds_are_tested_on_their_t_intervals() -> None:
    """Two 3-round pairs that stopped "decided": ±10 % intervals are t at 98 % with 2 degrees of freedom (6.965
    standard errors a side), so speedups 10.5 % apart differ (Welch's t at 4 degrees of freedom, 98 %); read as
    normal 95 % intervals (one child a side), the same intervals hold the difference. 4 % apart: no verdict."""
    from math import exp

    def pair(speedup: float, rounds: str | None) -> dict[str, Any]:
        return {**row(speedup, speedup / 1.1, speedup * 1.1), "rounds": rounds}

    assert difference(pair(1.5, "3 decided"), pair(1.5 * exp(0.1), "3 decided")) == "B faster"
    assert difference(pair(1.5 * exp(0.1), "3 decided"), pair(1.5, "3 decided")) == "B slower"
    assert difference(pair(1.5, None), pair(1.5 * exp(0.1), None)) == "no significant difference"
    assert difference(pair(1.5, "3 decided"), pair(1.5 * exp(0.04), "3 decided")) == "no significant difference"
    # 8 rounds run out (96 %, 7 degrees of freedom) against one child a side: the rounds' side still counts as t
    assert difference(pair(1.5, "8 max_rounds"), pair(1.5 * exp(0.2), None)) == "B faster"


@pytest.fixture(scope="module")
def suites(store: Store) -> dict[str, Any]:
    """A: eight pairs (p0..p7, 2x each, tight intervals) of which p7 mismatches; B: p0 (3x), p1 (2x) and a new one.
    Today's compare took the geomean of A's 7 verified pairs against B's 3: the shared pairs are p0 and p1."""
    store.experiment(EXP)

    def suite(name: str, pairs: dict[str, tuple[float, bool]]) -> str:
        with Tracker(experiment=EXP, tracking_uri=store.uri, run_name=name) as t:
            for i, (example, (speedup, verified)) in enumerate(pairs.items()):
                base = result(f"ch07:{example}:baseline", draw(2.0, 2 * i))
                opt = result(f"ch07:{example}:optimized", draw(2.0 / speedup, 2 * i + 1))
                cmp = pair(base, opt, verified).model_copy(update={
                    "speedup": speedup, "speedup_ci_low": speedup * 0.97, "speedup_ci_high": speedup * 1.03,
                    "significance": "faster"})  # fmt: skip
                t.log_variant(base, None)
                t.log_variant(opt, cmp)
            t.finish("# synthetic\n", {})
        return t.parent_run_id

    a = suite("A", {f"p{i}": (2.0, i != 7) for i in range(8)})
    b = suite("B", {"p0": (3.0, True), "p1": (2.0, True), "new": (5.0, True)})
    return {"a": a, "b": b}


def test_suites_compare_pair_by_pair_and_geomeans_over_shared_pairs(suites: dict[str, Any], store: Store) -> None:
    v = compare_suites(suites["a"], suites["b"], store.uri)
    assert [(p.name, p.verdict) for p in v.pairs] == [
        ("ch07:p0:optimized", "B faster"),
        ("ch07:p1:optimized", "no significant difference"),
    ]
    assert (v.pairs_a, v.pairs_b, v.counted) == (8, 3, 2)
    assert v.geomean_a == pytest.approx(2.0) and v.geomean_b == pytest.approx(math.sqrt(6.0))  # not 5x's pull
    assert v.only_a == [f"ch07:p{i}:optimized" for i in range(2, 8)] and v.only_b == ["ch07:new:optimized"]


def test_cli_prints_pairs_not_metrics_at_80_columns(
    suites: dict[str, Any], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(analysis.cli.console, "width", 80)
    out = CliRunner().invoke(cli.app, ["compare", suites["a"], suites["b"], "--tracking-uri", store.uri])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert all(len(x) <= 80 for x in lines) and "…" not in out.output
    assert "time_median_ms" not in out.output and "better" not in out.output  # no raw metric lines
    p0 = next(x for x in lines if x.startswith("p0 "))
    assert "2.00× [1.94–2.06]" in p0 and "3.00× [2.91–3.09]" in p0 and p0.rstrip().endswith("B faster")
    text = " ".join(out.output.split())  # the lines under the table wrap at 80 columns
    assert "2 pair(s) in both suites (A has 8, B 3): 1 B faster, 1 no significant difference" in text
    assert "geomean speedup over the 2 pair(s) verified ok in both suites: A 2.000×, B 2.449×" in text
    assert "pairs only in A: ch07:p2, ch07:p3, ch07:p4, ch07:p5, ch07:p6, ch07:p7" in text
    assert "pairs only in B: ch07:new" in text
    metrics = CliRunner().invoke(cli.app, ["compare", suites["a"], suites["b"], "--metrics", "--tracking-uri",
                                           store.uri])  # fmt: skip
    assert metrics.exit_code == 0 and "time_median_ms" in metrics.output
    assert "speedup_geomean" not in metrics.output  # 8 pairs against 3: no geomean delta, and a line says why
    assert "geomean speedups are left out: they ran different pairs" in " ".join(metrics.output.split())


def test_all_without_metrics_on_two_suites_is_refused_not_ignored(suites: dict[str, Any], store: Store) -> None:
    """``compare SUITE SUITE --all`` printed the pairs as if ``--all`` had not been given."""
    out = CliRunner().invoke(cli.app, ["compare", suites["a"], suites["b"], "--all", "--tracking-uri", store.uri])
    assert out.exit_code == 2 and "with two suites, pass --metrics too" in " ".join(out.output.split()), out.output


def test_at_80_columns_an_interval_wraps_whole_below_its_speedup() -> None:
    """ch19's names beside two speedups with intervals and "no significant difference" need ~100 columns; at 80 the
    speedup columns narrowed to their longest word, which broke each interval into "[2.13," above "4.08]": an
    interval stays on one line, below its speedup, and the names keep the room it leaves."""
    from rich.console import Console

    from analysis.versus import PairVersus, SuiteVersus, versus_table
    from bench.record.store import StoredRun

    names = ["ch19:fp8_training:optimized_tensorwise", "ch19:fp8_gemm:optimized_rowwise",
             "ch20:case_4_fused_adamw:optimized"]  # fmt: skip
    pairs = [PairVersus(n, row(2.95, 2.13, 4.08), row(3.1, 2.39, 3.74), "") for n in names]
    pairs = [PairVersus(p.name, p.a, p.b, difference(p.a, p.b)) for p in pairs]
    run = StoredRun("r", "suite", "0", "FINISHED", 0, {}, {})
    console = Console(width=80, record=True)
    console.print(versus_table(SuiteVersus(run, run, pairs, [], [], None, None, 0, 3, 3), 80))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert sum("[2.13–4.08]" in line for line in lines) == 3 and sum("[2.39–3.74]" in line for line in lines) == 3
    assert all(line.count("[") == line.count("]") for line in lines)  # no interval split over two lines
    for name in (*names[:2], "ch20:case_4_fused_adamw"):
        assert any(line.startswith(f"{name} ") for line in lines), name  # whole: the intervals gave their room


def test_the_title_wraps_at_the_console_not_at_the_narrower_table() -> None:
    """Two suites' names (79 characters) above a 62-column table broke at the table's edge, mid-date, though the
    console had 80 columns: the title is a line of its own, on one line where the console holds it."""
    from rich.console import Console

    from analysis.versus import PairVersus, SuiteVersus, versus_table
    from bench.record.store import StoredRun

    pairs = [PairVersus(n, row(1.13, 0.91, 1.42), row(1.11, 0.64, 1.93), "") for n in ("ch02:a:optimized",
                                                                                      "ch07:b:optimized")]  # fmt: skip
    pairs = [PairVersus(p.name, p.a, p.b, difference(p.a, p.b)) for p in pairs]
    a = StoredRun("ra", "ch02, ch07 on cpu, 2026-12-02 17:55", "0", "FINISHED", 0, {}, {})
    b = StoredRun("rb", "ch02, ch07 on cpu, 2026-12-02 17:56", "0", "FINISHED", 0, {}, {})
    console = Console(width=80, record=True)
    console.print(versus_table(SuiteVersus(a, b, pairs, [], [], None, None, 0, 2, 2), 80))
    title = "B ch02, ch07 on cpu, 2026-12-02 17:56 vs A ch02, ch07 on cpu, 2026-12-02 17:55"
    assert console.export_text().splitlines()[0].rstrip() == title


def test_a_difference_between_runs_of_the_same_files_says_so(tmp_path: Any) -> None:
    """Two runs of byte-identical files minutes apart on a busy host read 13.6x against 6.31x, "B slower": the
    verdict stands (the intervals differ), and the table and the lines under it say the files were the same, so the
    difference is the host's; a changed file, or one whose hash is unknown, gets no such note."""
    from analysis.versus import PairVersus, SuiteVersus, summary_lines, versus_table
    from bench.define.result import VariantSpec
    from bench.record.contract import variant_tags
    from bench.record.store import StoredRun

    (tmp_path / "baseline_sum.py").write_text("x = 1\n")
    spec = VariantSpec(chapter="ch07", example="sum", variant="baseline", path=str(tmp_path / "baseline_sum.py"))
    assert len(spec.source_sha256 or "") == 64
    assert variant_tags(result("ch07:sum:baseline", draw(1.0, 0)).model_copy(update={"spec": spec}))[
        "perflab.source_sha256"] == spec.source_sha256  # fmt: skip

    def side(speedup: float, low: float, high: float, files: list[str | None]) -> dict[str, Any]:
        return {**row(speedup, low, high), "source_sha256": files}

    same, changed = ["b" * 64, "o" * 64], ["b" * 64, "c" * 64]
    pairs = [PairVersus("ch07:sum:optimized", side(13.6, 7.34, 25.2, same), side(6.31, 4.22, 9.45, same), ""),
             PairVersus("ch07:mul:optimized", side(13.6, 7.34, 25.2, same), side(6.31, 4.22, 9.45, changed), ""),
             PairVersus("ch07:add:optimized", side(13.6, 7.34, 25.2, [None, None]),
                        side(6.31, 4.22, 9.45, [None, None]), "")]  # fmt: skip
    pairs = [PairVersus(p.name, p.a, p.b, difference(p.a, p.b)) for p in pairs]
    assert [p.verdict for p in pairs] == ["B slower"] * 3 and [p.same_files for p in pairs] == [True, False, False]
    run = StoredRun("r", "suite", "0", "FINISHED", 0, {}, {})
    cmp = SuiteVersus(run, run, pairs, [], [], None, None, 0, 3, 3)
    text = " ".join(summary_lines(cmp))
    assert "A and B are the same run (r): nothing is compared" in text
    assert "1 of them timed the same files in both suites" in text and "the host's, not the code's" in text
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(versus_table(cmp, 120))
    table = console.export_text()
    assert "B slower (same files)" in next(x for x in table.splitlines() if x.startswith("sum"))
    assert "(same files)" not in next(x for x in table.splitlines() if x.startswith("mul"))


def test_a_pair_whose_speedup_is_not_on_the_call_time_is_named_so() -> None:
    """Chapter 15's kv_cache speedup is on TPOT: ``perflab run``, ``show`` and the report name it (``on``), and
    ``compare`` printed ``1.23× [0.906–1.67]`` against ``1.25×`` as if they were call-time speedups; its table names
    what each pair's speedups are on where one is not the call time, at 80 columns too."""
    from rich.console import Console

    from analysis.versus import PairVersus, SuiteVersus, versus_table
    from bench.record.store import StoredRun

    pairs = [PairVersus("ch15:kv_cache:optimized", row(1.23, 0.906, 1.67, on="TPOT"), row(1.25, 0.847, 1.84, on="TPOT"),
                        "no significant difference"),
             PairVersus("ch15:prefill:optimized", row(2.0, 1.9, 2.1), row(2.0, 1.9, 2.1), "no significant difference"),
             PairVersus("ch15:batching:optimized", row(2.0, 1.9, 2.1), row(3.0, 2.9, 3.1, on="TTFT"),
                        "different metrics (call, TTFT)")]  # fmt: skip
    run = StoredRun("r", "suite", "0", "FINISHED", 0, {}, {})
    console = Console(width=80, record=True)
    console.print(versus_table(SuiteVersus(run, run, pairs, [], [], None, None, 0, 3, 3), 80))
    lines = console.export_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("pair "))
    assert all(len(line) <= 80 for line in lines) and lines[header].split()[:2] == ["pair", "on"], lines
    on = {line.split()[0]: line.split()[1:3] for line in lines[header + 2 :] if line[:1].strip()}
    assert on["kv_cache"][0] == "TPOT" and on["prefill"][0] == "call" and on["batching"] == ["call,", "TTFT"], lines


def test_the_lines_under_the_table_name_each_suites_commit() -> None:
    """Two suites at two commits compared: nothing said which commit either measured (the tag
    ``perflab.git_commit`` of each parent run), the first thing to know of a difference between them."""
    from analysis.versus import SuiteVersus, summary_lines
    from bench.record.store import StoredRun

    def run(run_id: str, commit: str | None, dirty: str = "false") -> StoredRun:
        tags = {"perflab.git_dirty": dirty, **({"perflab.git_commit": commit} if commit else {})}
        return StoredRun(run_id, "suite", "0", "FINISHED", 0, tags, {})

    def said(a: StoredRun, b: StoredRun) -> list[str]:
        return summary_lines(SuiteVersus(a, b, [], [], [], None, None, 0, 0, 0))

    assert "commits: A aaaa111, B bbbb222 (dirty tree)" in said(run("a", "aaaa111"), run("b", "bbbb222", "true"))
    assert "both at commit aaaa111" in said(run("a", "aaaa111"), run("b", "aaaa111"))
    assert "commits: A aaaa111, B unknown" in said(run("a", "aaaa111"), run("b", None))
    assert not any("commit" in line for line in said(run("a", "aaaa111"), run("a", "aaaa111")))  # one run


def test_metric_deltas_say_their_marks_are_no_verdict(suites: dict[str, Any], store: Store) -> None:
    """``--metrics`` marked ``time_median_ms`` -27 % "better" between two CPU suites whose variants' CV was 50-80 %:
    one reading a side, no interval. A line under the table says the marks are a direction, not a verdict, and
    where the tested ones are."""
    out = CliRunner().invoke(cli.app, ["compare", suites["a"], suites["b"], "--metrics", "--tracking-uri", store.uri])
    text = " ".join(out.output.split())
    assert out.exit_code == 0 and "one reading a side, no interval: a direction, not a verdict" in text, out.output
    assert "perflab regressions" in text
