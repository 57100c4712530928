"""Does the host CPU speed reference (bench.measure.hostspeed) name the rounds whose timed calls ran slow? Over
the variants measured in rounds under one or more ``perflab run --out`` directories (each variant's result.json):
per round, its median against the variant's fastest round's median, beside the reference's readings (before,
after) against the variant's fastest reading, and for a token-generating variant the median of the readings taken
after each of the round's generations (``host_ref_during_ms``) against its fastest round's; then how many slow
rounds (median ≥ SLOW× the fastest) each rule of the readings names, and how many calm rounds it names as well;
and, sample by sample, how closely a generation's time follows the reading after it (Spearman's rank correlation
within each variant).

    python3 scripts/timing/host_rounds.py DIR [DIR ...] [--slow 1.15]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.measure.rounds import split_rounds

RULES = {  # each a round's reading from (before, after, the note's ratio, during: None without)
    "the note (hostspeed)": lambda b, a, w, d: w,
    "before": lambda b, a, w, d: b,
    "after": lambda b, a, w, d: a,
    "both": lambda b, a, w, d: min(b, a),
    "during (median after each generation)": lambda b, a, w, d: d,
}


def _medians(values: list[float], counts: list[int]) -> list[float]:
    return [statistics.median(part) for part in split_rounds(values, counts)]


def rounds_of(result: dict) -> list[tuple[float, float, float, float, float | None]]:
    """(median ratio, before ratio, after ratio, the note's ratio: the slower reading against the fastest round's
    slower one, as ``slow_rounds_note``; the readings during the round, their median against the fastest round's, or
    None) per round of one variant; [] where it has no rounds' readings."""
    t = result.get("timing") or {}
    counts, refs, samples = t.get("rounds") or [], t.get("host_ref_ms") or [], t.get("samples_ms") or []
    if len(counts) < 2 or len(refs) != len(counts) or sum(counts) != len(samples) or not all(refs):
        return []
    meds = _medians(samples, counts)
    during = t.get("host_ref_during_ms") or []
    dur = _medians(during, counts) if len(during) == len(samples) else [None] * len(counts)
    fastest, ref0, worst0 = min(meds), min(min(r) for r in refs), min(max(r) for r in refs)
    dur0 = min(d for d in dur if d is not None) if dur[0] is not None else None
    return [(m / fastest, b / ref0, a / ref0, max(b, a) / worst0, d / dur0 if d is not None and dur0 else None)
            for m, (b, a), d in zip(meds, refs, dur, strict=True)]  # fmt: skip


def sample_correlation(result: dict) -> float | None:
    """Spearman's rank correlation of a variant's generation times with the reading taken right after each; None
    without readings or with fewer than 5 samples."""
    from scipy.stats import spearmanr

    t = result.get("timing") or {}
    samples, during = t.get("samples_ms") or [], t.get("host_ref_during_ms") or []
    if len(samples) < 5 or len(during) != len(samples):
        return None
    rho = spearmanr(samples, during).statistic
    return None if rho != rho else float(rho)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--slow", type=float, default=1.15, help="a round this many times its variant's fastest is slow")
    args = ap.parse_args()
    rows, rhos = [], []
    for d in args.dirs:
        for path in sorted(d.rglob("result.json")):
            result = json.loads(path.read_text())
            name = "/".join(path.parts[-3:-1])
            for m, b, a, w, du in rounds_of(result):
                rows.append((m, b, a, w, du))
                during = f"  during {du:5.2f}×" if du is not None else ""
                print(f"{name:36s} round median {m:5.3f}×  reference before {b:5.2f}×  after {a:5.2f}×{during}")
            if (rho := sample_correlation(result)) is not None:
                rhos.append(rho)
                print(f"{name:36s} generation time vs the reading after it: rank correlation {rho:+.2f}")
    slow = [row[0] >= args.slow for row in rows]
    print(f"\n{len(rows)} rounds, {sum(slow)} slow (≥ {args.slow}× the variant's fastest round)\n")
    print("| reading | at least | rounds named | slow rounds named | calm rounds named |\n|---|---:|---:|---:|---:|")
    for rule, f in RULES.items():
        read = [
            (f(b, a, w, du), s) for (_, b, a, w, du), s in zip(rows, slow, strict=True) if f(b, a, w, du) is not None
        ]
        n_slow = sum(s for _, s in read)
        for th in (1.2, 1.3, 1.4):
            named = [r >= th for r, _ in read]
            hit = sum(n and s for n, (_, s) in zip(named, read, strict=True))
            print(f"| {rule} | {th}× | {sum(named)} | {hit}/{n_slow} | {sum(named) - hit}/{len(read) - n_slow} |")
    if rhos:
        print(
            f"\ngeneration time vs the reading after it, over {len(rhos)} variants: median rank correlation "
            f"{statistics.median(rhos):+.2f} (range {min(rhos):+.2f} to {max(rhos):+.2f})"
        )


if __name__ == "__main__":
    main()
