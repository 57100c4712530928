"""scripts/timing/book_table.py: a book run's per-chapter row, with its later rounds' kept children and the
variants whose rounds ran on a slow host CPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("book_table", REPO / "scripts" / "timing" / "book_table.py")
book_table = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(book_table)  # type: ignore[union-attr]


def _variant(root: Path, example: str, variant: str, rounds: list[int], notes: list[str]) -> None:
    path = root / "ch16" / example / variant
    path.mkdir(parents=True)
    (path / "result.json").write_text(json.dumps({"timing": {"rounds": rounds, "notes": notes}}))


def test_a_row_counts_kept_later_rounds_and_rounds_on_a_slow_host(tmp_path: Path) -> None:
    timeline = [{"key": "ch16:a:baseline", "round": 0, "launch": "server"},
                {"key": "ch16:a:baseline", "round": 1, "launch": "kept"},
                {"key": "ch16:a:optimized", "round": 1, "launch": "server"},
                {"key": "ch16:a:optimized", "round": 2, "launch": "kept"}]  # fmt: skip
    summary = {"n_variants": 3, "n_variants_ok": 3, "timeline": timeline,
               "variants": [{"key": "ch16:a:baseline", "elapsed_s": 10.0}]}  # fmt: skip
    _variant(tmp_path, "a", "baseline", [3, 3, 3], ["host CPU slow in round 2: a fixed CPU reference ran 1.60× …"])
    _variant(tmp_path, "a", "optimized", [4, 4, 4], ["drift: not a steady state"])
    _variant(tmp_path, "b", "baseline", [5], ["host CPU slow in round 1: …"])  # one round: not counted
    cells = [c.strip() for c in book_table.row("ch16", summary, (60.0, "0"), tmp_path).strip("|").split("|")]
    assert cells[7] == "kept 2/3" and cells[8] == "1/2", cells


def test_a_chapter_without_later_rounds_or_result_files_reads_a_dash(tmp_path: Path) -> None:
    summary = {"timeline": [{"key": "ch16:a:baseline", "round": 0, "launch": "server"}]}
    cells = [c.strip() for c in book_table.row("ch16", summary, None, tmp_path).strip("|").split("|")]
    assert cells[7] == "—" and cells[8] == "—", cells


def test_the_split_names_profile_children_and_the_time_outside_the_stages() -> None:
    # profile children and logging run after a child's exit (the time line's other_s), outside its run_s
    summary = {"stages_s": {"setup": 10.0, "measurement": 50.0, "profile": 26.0, "logging": 3.0},
               "time_breakdown": {"workers": 1, "run_s": 70.0},
               "timeline": [{"compare_s": 1.0, "other_s": 0.5}, {"compare_s": 0.0, "other_s": 29.5}]}  # fmt: skip
    cells = [c.strip() for c in book_table.row("ch13", summary, None).strip("|").split("|")]
    assert cells[9] == "setup 10 measurement 50 profile 26 logging 3 other 12", cells
    summary["time_breakdown"]["workers"] = 2  # stages of two workers overlap: no "other"
    cells = [c.strip() for c in book_table.row("ch13", summary, None).strip("|").split("|")]
    assert cells[9] == "setup 10 measurement 50 profile 26 logging 3", cells
