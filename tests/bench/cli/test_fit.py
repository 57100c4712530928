"""bench/cli/fit.py and the lines it fits, as a reader sees them at ``COLUMNS=80`` without a terminal: a suite's
closing lines (``perflab run``), the Markdown reports of ``perflab selfcheck`` and ``perflab overhead`` (a sweep's:
tests/sweeps); every line within 80 columns, no word (a figure, a path) cut, nothing lost."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from bench.cli import fit_tables, for_terminal, wrapped
from bench.define.result import SuiteResult, VariantResult, VariantSpec

LONG = ("stages (summed over 16 variants): start 1.8 s, set-up 0.0 s, warm-up 1.9 s, measurement 2.1 s, checks 1.0 s, "
        "batch 0.6 s, profile 0.0 s, logging 12.0 s; most: logging")  # fmt: skip


def screen(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), emoji=False, color_system=None)


def lines_of(out: Console) -> list[str]:
    assert isinstance(out.file, io.StringIO)
    return out.file.getvalue().splitlines()


def words(text: str) -> list[str]:
    return text.split()


def test_a_line_wraps_between_words_under_a_hanging_indent() -> None:
    lines = wrapped(LONG, 80).split("\n")
    assert len(lines) == 3 and all(len(x) <= 80 for x in lines), lines
    assert all(x.startswith("    ") and not x.startswith("     ") for x in lines[1:]), lines
    assert words("\n".join(lines)) == words(LONG)  # nothing lost, nothing cut
    assert not any(re.search(r"\d$", x) for x in lines), lines  # a figure keeps its unit: never "12.0" / "s"
    indented = wrapped("  " + LONG, 80).split("\n")  # a continuation line of a line already indented
    assert indented[0].startswith("  s") and all(x.startswith("      ") for x in indented[1:]), indented
    assert wrapped(LONG, 200) == LONG  # a line that fits is left alone


def test_a_path_wider_than_the_line_stays_whole() -> None:
    path = "/home/someone/" + "x" * 90 + "/perflab-results/ch07"
    lines = wrapped(f"files: {path} (summary.json, summary.md, junit.xml, a directory per variant)", 80).split("\n")
    assert "    " + path in lines and lines[0] == "files:", lines  # on a line of its own, not folded at the edge
    assert all(len(x) <= 80 for x in lines if x.strip() != path)


def test_a_suites_closing_lines_fit_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """``perflab run``'s closing lines (the ``time:`` line and its indented ones, the ``stages`` line, ``files:``)
    ran to 122, 165 and 84 characters at ``COLUMNS=80``; each now wraps between words, its figures and path whole."""
    from bench.cli import report
    from bench.define.result import StageRecord

    out = screen(80)
    monkeypatch.setattr(report, "console", out)
    entry = {"worker": 0, "start_s": 0.1, "end_s": 10.0, "ahead_s": 0.3, "late_s": 0.1, "beside": False}
    timeline = [{**entry, "key": "ch07:t:baseline", "run_s": 2.0, "compare_s": 0.0, "other_s": 27.3},
                {**entry, "key": "ch07:t:optimized", "run_s": 2.5, "compare_s": 0.1, "other_s": 22.2}]  # fmt: skip
    stages = [
        StageRecord(name=n, status="ok", duration_s=d)
        for n, d in [
            ("startup", 0.9),
            ("setup", 0.1),
            ("warmup", 1.0),
            ("measurement", 1.1),
            ("check", 0.5),
            ("batch", 0.3),
        ]
    ]
    variants = [VariantResult(spec=VariantSpec(chapter="ch07", example="transpose", variant=v, path="/x.py"),
                              status="ok", stages=stages) for v in ("baseline", "optimized")]  # fmt: skip
    suite = SuiteResult(variants=variants, comparisons=[], wall_s=54.2, timeline=timeline)
    root = Path("/home/someone/perflab-results/ch07-on-cpu-2026-11-26")
    files: Any = SimpleNamespace(root=root, finish=lambda *_: None)
    sink: Any = SimpleNamespace(ready_s=11.6, wait_s=0.3, busy_s=12.0)
    report.report_suite(suite, None, sink, True, 1.29, files)
    lines = lines_of(out)
    assert all(len(x) <= 80 for x in lines), lines
    text = "\n".join(lines)
    starts = [i for i, x in enumerate(lines) if x.startswith(("time: ", "stages (summed over 2", "files: "))]
    assert len(starts) == 3, text
    for i in starts:  # each line's continuation under a hanging indent of 4
        more = lines[i + 1]
        assert more.startswith("    ") and not more.startswith("     "), text
    assert "profiling and logging after the runs" in " ".join(text.split())
    assert str(root) in text and "most: logging" in text


def test_at_200_columns_the_closing_lines_stay_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.cli import report

    out = screen(200)
    monkeypatch.setattr(report, "console", out)
    entry = {"worker": 0, "start_s": 0.1, "end_s": 10.0, "ahead_s": 0.0, "late_s": 0.0, "beside": False}
    timeline = [{**entry, "key": "ch07:t:baseline", "run_s": 2.0, "compare_s": 0.1, "other_s": 2.0}]
    report.report_suite(SuiteResult(variants=[], comparisons=[], wall_s=5.0, timeline=timeline), None, None, True,
                        None)  # fmt: skip
    time_line = next(x for x in lines_of(out) if x.startswith("time: "))
    assert time_line.endswith(" s idle")  # one line: 110 characters fit in 200


def selfcheck_report() -> dict[str, Any]:
    """A GPU host's selfcheck: three modes of two workloads, notes on some cells."""

    def cell(workload: str, mode: str, ms: float, note: str | None) -> dict[str, Any]:
        return {"workload": workload, "mode": mode, "median_ms": ms, "medians_ms": [ms] * 7, "samples": [2500],
                "wall_s": [1.25], "truth_ms": ms * 1.01, "ncu_ms": ms * 0.98, "note": note, "calls_per_sample": 1,
                "error_pct": -1.0, "cv_pct": 0.42}  # fmt: skip

    truth = {"truth_ms": 0.0123, "truth_method": "median of 7 blocks of 2000 back-to-back calls, each under one "
             "perf_counter, after 0.3 s", "ncu_ms": 0.0120, "ncu_method": "gpu__time_duration.sum"}  # fmt: skip
    cells = [cell(w, m, 0.0123, n) for w in ("matmul_bf16", "scale_64mib")
             for m, n in [("cuda_event", None), ("cuda_graph", "cold = graph [flush, call] minus graph [flush]"),
                          ("triton", "do_bench's own L2 flush; fallback to cuda_event for the batch")]]  # fmt: skip
    return {"device": "NVIDIA H200", "torch": "2.13.0+cu130", "repeats": 7, "isolated": True, "config": None,
            "copy_bandwidth_gbps": 4100.0, "truths": {"matmul_bf16": truth, "scale_64mib": truth}, "skipped": {},
            "cells": cells}  # fmt: skip


def test_selfchecks_table_fits_80_columns_its_notes_under_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``perflab selfcheck`` printed its Markdown table (rows of ~150 characters) for rich to fold at 80 columns; the
    terminal now gets a table that fits, each note under it naming its row, and the Markdown stays in the file."""
    from bench.audit.selfcheck import markdown
    from bench.cli import common

    out = screen(80)
    monkeypatch.setattr(common, "console", out)
    report = selfcheck_report()
    text = markdown(report)
    assert max(len(x) for x in text.splitlines()) > 80
    common.emit(text, report, tmp_path, "selfcheck")
    lines = lines_of(out)
    path = str(tmp_path / "selfcheck.md")  # a path is never cut: alone on its line, it may be wider (pytest-xdist's)
    assert lines and all(len(x) <= 80 or x.strip() == path for x in lines), "\n".join(lines)
    header = next(x for x in lines if x.startswith("workload"))
    assert header.split()[:2] == ["workload", "mode"] and "note" not in header, lines
    assert any(x.split()[:2] == ["matmul_bf16", "cuda_graph"] for x in lines), lines
    assert "cold = graph [flush, call] minus graph [flush]" in " ".join(" ".join(lines).split())  # data, not markup
    assert (tmp_path / "selfcheck.md").read_text() == text  # the file keeps the Markdown
    assert lines[-1] == f"the tables as Markdown: {tmp_path / 'selfcheck.md'}" or str(tmp_path) in lines[-1]


def test_overheads_tables_of_figures_turn_on_their_side_at_80_columns() -> None:
    from bench.audit.overhead import markdown

    path = {"n": 10, "wall_s": 1.0, "overhead_per_variant_s": 0.1, "overhead_first_s": 0.1, "overhead_median_s": 0.1,
            "overhead_after_first_s": 0.1, "all_ok": True, "split_s": {"startup": 0.01, "setup": 0.005,
            "warmup": 0.3, "measurement": 0.007, "check": 0.009, "batch": 0.05, "recheck": 0.001, "teardown": 0.0,
            "outside": 0.05}}  # fmt: skip
    report = {"fast": {**path, "path": "fast (server)"}, "cold": {**path, "path": "cold_start (spawn)"},
              "suite": {"path": "suite (server, started ahead)", "n": 10, "wall_s": 1.3, "overhead_per_variant_s": 0.2,
                        "all_ok": True}, "cold_over_fast": 18.9}  # fmt: skip
    text = markdown(report)
    assert max(len(x) for x in text.splitlines()) > 80
    shown = for_terminal(text, 80).splitlines()
    assert all(len(x) <= 80 for x in shown), "\n".join(shown)
    assert shown[0].split() == ["path", "fast", "(server)", "cold_start", "(spawn)"], shown
    assert any(x.split() == ["overhead", "/", "variant", "s", "0.100", "0.100"] for x in shown), shown
    assert any(x.split() == ["startup", "*", "0.010", "0.010"] for x in shown), shown
    assert for_terminal(text, 200) == text  # wide enough: the Markdown as it is


def test_a_table_with_words_in_its_cells_is_not_turned() -> None:
    md = ("| trial | configuration | status | samples/s |\n|---:|---|---|---:|\n"
          "| 1 | bs=32 w=0 amp | ok | 123.4 |\n| 2 | bs=64 w=0 amp | failed | — |")  # fmt: skip
    assert fit_tables(md, 30).splitlines()[0].split()[:2] == ["trial", "configuration"]


def test_prose_wraps_list_items_and_comments_keep_their_form_code_is_left() -> None:
    item = "- " + " ".join(["word"] * 30)
    comment = "# perflab sweep: " + " ".join(["because"] * 15)
    code = "```\n" + "x" * 100 + "\n```"
    shown = for_terminal(f"{item}\n\n{comment}\n\n{code}", 40).splitlines()
    assert all(len(x) <= 40 for x in shown if "x" * 100 not in x), shown
    at = shown.index("")
    assert shown[0].startswith("- ") and all(x.startswith("  word") for x in shown[1:at]), shown
    comments = shown[at + 1 : shown.index("", at + 1)]
    assert len(comments) > 1 and all(x.startswith("# ") for x in comments), shown
    assert "x" * 100 in shown  # a code block as it is
