"""Issue 42's check of a whole-book run against a reference run: per pair, the same verdict? an interval no more than
1.5x as wide (relative width: (high - low) / speedup)? The book run is the ``--out`` directories of gpu_session.sh's
``book`` step (``DIR/chN/summary.json``); the reference is one or more MLflow stores (``.db`` or ``.db.xz``, e.g.
docs/results/h200-2026-11-26/call*/), the latest run of each pair counting, or ``--out`` directories of an earlier
run (a chapter's ``DIR/summary.json`` or a book step's ``DIR/chN/summary.json``; a later one wins a pair in both).

    python3 scripts/timing/book_compare.py BOOK_DIR REFERENCE.db[.xz]|REFERENCE_DIR [...] [--max-ratio 1.5]

Prints a Markdown table of the pairs in both, then one line: how many verdicts agree and how many intervals are
within the ratio. Exit status 0 when every pair in both agrees and is within it, 1 otherwise, 2 when none are in both.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple


class Pair(NamedTuple):
    speedup: float
    low: float | None
    high: float | None
    verdict: str

    @property
    def width(self) -> float | None:
        if self.low is None or self.high is None or not self.speedup:
            return None
        return (self.high - self.low) / self.speedup

    def text(self) -> str:
        interval = f" [{self.low:.2f}, {self.high:.2f}]" if self.low is not None and self.high is not None else ""
        return f"{self.speedup:.2f}×{interval} {self.verdict}"


def book_pairs(root: Path) -> dict[str, Pair]:
    out = {}
    for summary in sorted([*root.glob("summary.json"), *root.glob("*/summary.json")]):
        for p in json.loads(summary.read_text()).get("pairs", []):
            if p.get("speedup") is None:
                continue
            key = f"{p['chapter']}:{p['example']}:{p['variant']}"
            verdict = p.get("significance") or p.get("verdict") or "unknown"
            out[key] = Pair(p["speedup"], p.get("speedup_ci_low"), p.get("speedup_ci_high"), verdict)
    return out


_QUERY = """
select r.start_time, c.value, e.value, v.value, s.value,
       (select value from metrics m where m.run_uuid = r.run_uuid and m.key = 'speedup'),
       (select value from metrics m where m.run_uuid = r.run_uuid and m.key = 'speedup_ci_low'),
       (select value from metrics m where m.run_uuid = r.run_uuid and m.key = 'speedup_ci_high')
from runs r
join tags c on c.run_uuid = r.run_uuid and c.key = 'perflab.chapter'
join tags e on e.run_uuid = r.run_uuid and e.key = 'perflab.example'
join tags v on v.run_uuid = r.run_uuid and v.key = 'perflab.variant'
join tags s on s.run_uuid = r.run_uuid and s.key = 'perflab.significance'
order by r.start_time
"""


def store_pairs(path: Path) -> dict[str, tuple[int, Pair]]:
    """(start time, pair) of each pair's latest run in an MLflow SQLite store (``.xz`` unpacked to a temp file)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = path
        if path.suffix == ".xz":
            db = Path(tmp) / path.stem
            db.write_bytes(lzma.decompress(path.read_bytes()))
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute(_QUERY).fetchall()
        finally:
            con.close()
    out: dict[str, tuple[int, Pair]] = {}
    for start, chapter, example, variant, verdict, speedup, low, high in rows:
        if speedup is not None:
            out[f"{chapter}:{example}:{variant}"] = (start, Pair(speedup, low, high, verdict))
    return out


def reference_pairs(paths: list[Path]) -> dict[str, Pair]:
    latest: dict[str, tuple[int, Pair]] = {}
    for order, path in enumerate(paths):
        found = {k: (order, p) for k, p in book_pairs(path).items()} if path.is_dir() else store_pairs(path)
        for key, (start, pair) in found.items():
            if key not in latest or start > latest[key][0]:
                latest[key] = (start, pair)
    return {k: p for k, (_, p) in latest.items()}


def compare(new: dict[str, Pair], old: dict[str, Pair], max_ratio: float) -> tuple[list[str], int, int, int]:
    """The table's rows, and (pairs in both, verdicts the same, intervals within max_ratio of the reference's)."""
    rows, same, narrow = [], 0, 0
    both = sorted(set(new) & set(old))
    for key in both:
        a, b = old[key], new[key]
        agrees = a.verdict == b.verdict
        ratio = b.width / a.width if a.width and b.width is not None else None
        within = ratio is not None and ratio <= max_ratio
        same += agrees
        narrow += within
        shown = f"{ratio:.2f}" if ratio is not None else "—"
        rows.append(f"| {key} | {a.text()} | {b.text()} | {'yes' if agrees else 'NO'} | {shown} |")
    return rows, len(both), same, narrow


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("book", type=Path, help="the book step's directory of chN/summary.json")
    ap.add_argument(
        "reference", type=Path, nargs="+", help="MLflow stores (.db, .db.xz) or --out directories of reference runs"
    )
    ap.add_argument("--max-ratio", type=float, default=1.5, help="an interval's width over the reference's (1.5)")
    args = ap.parse_args(argv)
    rows, n, same, narrow = compare(book_pairs(args.book), reference_pairs(args.reference), args.max_ratio)
    if not n:
        print(f"no pair of {args.book} is in the reference runs")
        return 2
    print("| pair | reference | book run | same verdict | width ratio |")
    print("|---|---|---|---|---:|")
    print("\n".join(rows))
    print(f"\n{n} pairs in both: {same} the same verdict, {narrow} with an interval within {args.max_ratio:g}× "
          f"the reference's width")  # fmt: skip
    return 0 if same == n and narrow == n else 1


if __name__ == "__main__":
    sys.exit(main())
