"""Issue 42's check of a whole-book run against a reference run: per pair, the same verdict? an interval no more than
1.5x as wide (relative width: (high - low) / speedup)? The book run is the ``--out`` directories of gpu_session.sh's
``book`` step (``DIR/chN/summary.json``); the reference is one or more MLflow stores (``.db`` or ``.db.xz``, e.g.
docs/results/h200-2026-11-26/call*/), the latest run of each pair counting, or ``--out`` directories of an earlier
run (a chapter's ``DIR/summary.json`` or a book step's ``DIR/chN/summary.json``; a later one wins a pair in both).

    python3 scripts/timing/book_compare.py BOOK_DIR REFERENCE.db[.xz]|REFERENCE_DIR [...] [--max-ratio 1.5]
        [--median-width]

Prints a Markdown table of the pairs in both, then one line: how many verdicts agree and how many intervals are
within the ratio. ``--median-width``: the width a pair's interval is held to is the median over every reference run
of it (each store's runs of it, each directory's), not the latest run's alone: at the same settings, one run's
interval can be 1.7x as wide as another's (three rounds under a host whose CPU speed swings), so one reference run
is one draw of that spread; the verdict is still the latest reference run's. Exit status 0 when every pair in both
agrees and is within it, 1 otherwise, 2 when none are in both.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sqlite3
import statistics
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


def store_runs(path: Path) -> dict[str, list[tuple[int, Pair]]]:
    """(start time, pair) of each run of each pair in an MLflow SQLite store (``.xz`` unpacked to a temp file), by
    start."""
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
    out: dict[str, list[tuple[int, Pair]]] = {}
    for start, chapter, example, variant, verdict, speedup, low, high in rows:
        if speedup is not None:
            out.setdefault(f"{chapter}:{example}:{variant}", []).append((start, Pair(speedup, low, high, verdict)))
    return out


def reference_runs(paths: list[Path]) -> dict[str, list[Pair]]:
    """Every reference run of each pair, the latest last (a store's by start time; directories in the order given,
    a later one later)."""
    runs: dict[str, list[tuple[int, int, Pair]]] = {}
    for order, path in enumerate(paths):
        if path.is_dir():
            found = {k: [(order, p)] for k, p in book_pairs(path).items()}
        else:
            found = store_runs(path)
        for key, items in found.items():
            runs.setdefault(key, []).extend((start, order, pair) for start, pair in items)
    return {k: [p for _, _, p in sorted(items, key=lambda t: (t[0], t[1]))] for k, items in runs.items()}


def compare(new: dict[str, Pair], old: dict[str, Pair], max_ratio: float,
            widths: dict[str, float] | None = None) -> tuple[list[str], int, int, int]:  # fmt: skip
    """The table's rows, and (pairs in both, verdicts the same, intervals within max_ratio of the reference's width:
    its latest run's, or ``widths``' where given)."""
    rows, same, narrow = [], 0, 0
    both = sorted(set(new) & set(old))
    for key in both:
        a, b = old[key], new[key]
        agrees = a.verdict == b.verdict
        width = widths.get(key) if widths is not None else a.width
        ratio = b.width / width if width and b.width is not None else None
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
    ap.add_argument("--median-width", action="store_true",
                    help="hold each interval to the median width of every reference run of its pair")  # fmt: skip
    args = ap.parse_args(argv)
    runs = reference_runs(args.reference)
    widths = None
    if args.median_width:
        widths = {k: statistics.median(ws) for k, ps in runs.items() if (ws := [p.width for p in ps if p.width])}
    latest = {k: ps[-1] for k, ps in runs.items()}
    rows, n, same, narrow = compare(book_pairs(args.book), latest, args.max_ratio, widths)
    if not n:
        print(f"no pair of {args.book} is in the reference runs")
        return 2
    print("| pair | reference | book run | same verdict | width ratio |")
    print("|---|---|---|---|---:|")
    print("\n".join(rows))
    held = "the median width of the reference runs" if args.median_width else "the reference's width"
    print(f"\n{n} pairs in both: {same} the same verdict, {narrow} with an interval within {args.max_ratio:g}× "
          f"{held}")  # fmt: skip
    return 0 if same == n and narrow == n else 1


if __name__ == "__main__":
    sys.exit(main())
