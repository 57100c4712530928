"""Does the host CPU speed reference (bench.measure.hostspeed) name the rounds whose timed calls ran slow? Over
the variants measured in rounds under one or more ``perflab run --out`` directories (each variant's result.json):
per round, its median against the variant's fastest round's median, beside the reference's readings (before,
after) against the variant's fastest reading; then how many slow rounds (median ≥ SLOW× the fastest) each rule of
the readings names, and how many calm rounds it names as well.

    python3 scripts/timing/host_rounds.py DIR [DIR ...] [--slow 1.15]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

RULES = {  # each a round's reading from (before, after, the note's ratio)
    "the note (hostspeed)": lambda b, a, w: w,
    "before": lambda b, a, w: b,
    "after": lambda b, a, w: a,
    "both": lambda b, a, w: min(b, a),
}


def rounds_of(result: dict) -> list[tuple[float, float, float, float]]:
    """(median ratio, before ratio, after ratio, the note's ratio: the slower reading against the fastest round's
    slower one, as ``slow_rounds_note``) per round of one variant; [] where it has no rounds' readings."""
    t = result.get("timing") or {}
    counts, refs, samples = t.get("rounds") or [], t.get("host_ref_ms") or [], t.get("samples_ms") or []
    if len(counts) < 2 or len(refs) != len(counts) or sum(counts) != len(samples):
        return []
    meds, i = [], 0
    for n in counts:
        meds.append(statistics.median(samples[i : i + n]))
        i += n
    fastest, ref0, worst0 = min(meds), min(min(r) for r in refs), min(max(r) for r in refs)
    return [(m / fastest, b / ref0, a / ref0, max(b, a) / worst0) for m, (b, a) in zip(meds, refs, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--slow", type=float, default=1.15, help="a round this many times its variant's fastest is slow")
    args = ap.parse_args()
    rows = []
    for d in args.dirs:
        for path in sorted(d.rglob("result.json")):
            for m, b, a, w in rounds_of(json.loads(path.read_text())):
                name = "/".join(path.parts[-3:-1])
                rows.append((m, b, a, w))
                print(f"{name:36s} round median {m:5.3f}×  reference before {b:5.2f}×  after {a:5.2f}×")
    slow = [row[0] >= args.slow for row in rows]
    print(f"\n{len(rows)} rounds, {sum(slow)} slow (≥ {args.slow}× the variant's fastest round)\n")
    print("| reading | at least | rounds named | slow rounds named | calm rounds named |\n|---|---:|---:|---:|---:|")
    for rule, f in RULES.items():
        for th in (1.2, 1.3, 1.4):
            named = [f(b, a, w) >= th for _, b, a, w in rows]
            hit = sum(n and s for n, s in zip(named, slow, strict=True))
            print(f"| {rule} | {th}× | {sum(named)} | {hit}/{sum(slow)} | {sum(named) - hit}/{len(rows) - sum(slow)} |")


if __name__ == "__main__":
    main()
