"""scripts/timing/book_compare.py: a book run's pairs against a reference store's latest runs — the verdicts and the
intervals' relative widths, and an exit status a CI job can act on."""

from __future__ import annotations

import importlib.util
import json
import lzma
import sqlite3
from pathlib import Path

REPO = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("book_compare", REPO / "scripts" / "timing" / "book_compare.py")
book_compare = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(book_compare)  # type: ignore[union-attr]


def _store(path: Path, runs: list[tuple[int, str, str, str, float, float, float]]) -> None:
    """The tables of an MLflow store the script reads: a variant run's tags and its pair's metrics."""
    con = sqlite3.connect(path)
    con.executescript("create table runs (run_uuid text, start_time integer);"
                      "create table tags (run_uuid text, key text, value text);"
                      "create table metrics (run_uuid text, key text, value real);")  # fmt: skip
    for i, (start, example, variant, verdict, speedup, low, high) in enumerate(runs):
        uid = f"r{i}"
        con.execute("insert into runs values (?, ?)", (uid, start))
        tags = {"chapter": "ch07", "example": example, "variant": variant, "significance": verdict}
        con.executemany("insert into tags values (?, ?, ?)", [(uid, f"perflab.{k}", v) for k, v in tags.items()])
        metrics = {"speedup": speedup, "speedup_ci_low": low, "speedup_ci_high": high}
        con.executemany("insert into metrics values (?, ?, ?)", [(uid, k, v) for k, v in metrics.items()])
    con.commit()
    con.close()


def _book(root: Path, pairs: list[dict]) -> Path:
    (root / "ch07").mkdir(parents=True)
    rows = [{"chapter": "ch07", "variant": "optimized", **p} for p in pairs]
    (root / "ch07" / "summary.json").write_text(json.dumps({"pairs": rows}))
    return root


def test_verdicts_and_widths_against_the_latest_reference_run(tmp_path: Path, capsys) -> None:
    db = tmp_path / "ref.db"
    _store(db, [(1, "aos_soa", "optimized", "slower", 0.6, 0.5, 0.9),  # an older run of the pair: not counted
                (2, "aos_soa", "optimized", "faster", 1.2, 1.1, 1.3),
                (2, "tiling", "optimized", "faster", 2.0, 1.9, 2.1)])  # fmt: skip
    packed = tmp_path / "ref.db.xz"
    packed.write_bytes(lzma.compress(db.read_bytes()))
    book = _book(tmp_path / "book", [
        {"example": "aos_soa", "speedup": 1.25, "speedup_ci_low": 1.2, "speedup_ci_high": 1.3,
         "significance": "faster"},
        {"example": "tiling", "speedup": 2.0, "speedup_ci_low": 1.7, "speedup_ci_high": 2.3, "significance": "faster"},
        {"example": "only_new", "speedup": 3.0, "speedup_ci_low": 2.9, "speedup_ci_high": 3.1,
         "significance": "faster"},
    ])  # fmt: skip
    assert book_compare.main([str(book), str(packed)]) == 1  # tiling's interval is 3x as wide
    out = capsys.readouterr().out
    assert "| ch07:aos_soa:optimized | 1.20× [1.10, 1.30] faster | 1.25× [1.20, 1.30] faster | yes | 0.48 |" in out
    assert "| ch07:tiling:optimized | 2.00× [1.90, 2.10] faster | 2.00× [1.70, 2.30] faster | yes | 3.00 |" in out
    assert "2 pairs in both: 2 the same verdict, 1 with an interval within 1.5× the reference's width" in out
    assert book_compare.main([str(book), str(db), "--max-ratio", "3"]) == 0


def test_a_flipped_verdict_fails_and_nothing_in_common_says_so(tmp_path: Path, capsys) -> None:
    db = tmp_path / "ref.db"
    _store(db, [(1, "aos_soa", "optimized", "faster", 1.2, 1.1, 1.3)])
    flipped = _book(tmp_path / "a", [{"example": "aos_soa", "speedup": 0.8, "speedup_ci_low": 0.75,
                                      "speedup_ci_high": 0.85, "significance": "slower"}])  # fmt: skip
    assert book_compare.main([str(flipped), str(db)]) == 1
    assert "| NO |" in capsys.readouterr().out
    other = _book(tmp_path / "b", [{"example": "other", "speedup": 1.0, "significance": "no difference"}])
    assert book_compare.main([str(other), str(db)]) == 2
    assert "is in the reference runs" in capsys.readouterr().out


def test_a_reference_out_directory_of_one_chapter_or_a_book(tmp_path: Path, capsys) -> None:
    new = _book(tmp_path / "new", [{"example": "aos_soa", "speedup": 1.2, "speedup_ci_low": 1.1,
                                    "speedup_ci_high": 1.3, "significance": "faster"}])  # fmt: skip
    old = _book(tmp_path / "old", [{"example": "aos_soa", "speedup": 1.25, "speedup_ci_low": 1.15,
                                    "speedup_ci_high": 1.35, "significance": "faster"}])  # fmt: skip
    later = _book(tmp_path / "later", [{"example": "aos_soa", "speedup": 0.8, "speedup_ci_low": 0.7,
                                        "speedup_ci_high": 0.9, "significance": "slower"}])  # fmt: skip
    assert book_compare.main([str(new), str(old / "ch07")]) == 0  # a chapter's own --out directory
    assert "| ch07:aos_soa:optimized | 1.25× [1.15, 1.35] faster | 1.20× [1.10, 1.30] faster | yes |" in (
        capsys.readouterr().out
    )
    assert book_compare.main([str(new), str(old), str(later)]) == 1  # a book's; the later reference wins the pair
    assert "0.80× [0.70, 0.90] slower | 1.20× [1.10, 1.30] faster | NO |" in capsys.readouterr().out


def test_median_width_holds_an_interval_to_every_reference_runs_width(tmp_path: Path, capsys) -> None:
    db = tmp_path / "ref.db"
    _store(db, [(1, "aos_soa", "optimized", "faster", 1.0, 0.9, 1.1),  # width 0.2
                (2, "aos_soa", "optimized", "faster", 1.0, 0.95, 1.05)])  # fmt: skip  # the latest: 0.1
    wide = _book(tmp_path / "wide", [{"example": "aos_soa", "speedup": 1.0, "speedup_ci_low": 0.92,
                                      "speedup_ci_high": 1.08, "significance": "faster"}])  # fmt: skip
    later = _book(tmp_path / "later", [{"example": "aos_soa", "speedup": 1.0, "speedup_ci_low": 0.85,
                                        "speedup_ci_high": 1.15, "significance": "slower"}])  # fmt: skip  # 0.3
    assert book_compare.main([str(wide), str(db)]) == 1  # 0.16 against the latest's 0.1: 1.6x
    assert "| yes | 1.60 |" in capsys.readouterr().out
    assert book_compare.main([str(wide), str(db), "--median-width"]) == 0  # against the median of 0.2 and 0.1
    out = capsys.readouterr().out
    assert "| yes | 1.07 |" in out and "within 1.5× the median width of the reference runs" in out
    older = _book(tmp_path / "older", [{"example": "aos_soa", "speedup": 1.0, "speedup_ci_low": 0.9,
                                        "speedup_ci_high": 1.1, "significance": "faster"}])  # fmt: skip  # 0.2
    newer = _book(tmp_path / "newer", [{"example": "aos_soa", "speedup": 1.0, "speedup_ci_low": 0.95,
                                        "speedup_ci_high": 1.05, "significance": "faster"}])  # fmt: skip  # 0.1
    # Directories: the one given last is the latest (its verdict counts); the widths' median is 0.2.
    assert book_compare.main([str(wide), str(older), str(later), str(newer), "--median-width"]) == 0
    out = capsys.readouterr().out
    assert "| 1.00× [0.95, 1.05] faster | 1.00× [0.92, 1.08] faster | yes | 0.80 |" in out
    assert book_compare.main([str(wide), str(newer), str(later), "--median-width"]) == 1  # the latest: slower
    assert "| 1.00× [0.85, 1.15] slower | 1.00× [0.92, 1.08] faster | NO | 0.80 |" in capsys.readouterr().out
