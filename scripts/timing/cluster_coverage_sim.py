"""How often a percentile speedup's interval (bench.measure.stats.cluster_speedup_interval) holds 1.0 for two
sides drawn from one distribution: its coverage, with and without the small-sample t(G - 1) scaling.

Each side is G generations; a generation's values share a factor (lognormal, 3 %) times their own noise
(lognormal, 20 %), ITL with 2 % of tokens stalled 5x. Metrics as the generation pairs name them: ``itl``
(median of 200 tokens a generation), ``itl_p99``, ``ttft_p90`` (16 requests), ``tpot_p99`` (48 requests).

    python3 scripts/timing/cluster_coverage_sim.py [--generations 4 8 16] [--pairs 100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.measure import stats  # noqa: E402

METRICS = (("itl", 200, 50, True), ("itl_p99", 200, 99, True), ("ttft_p90", 16, 90, False), ("tpot_p99", 48, 99, False))


def side(rng: np.random.Generator, generations: int, n: int, stalls: bool) -> list[list[float]]:
    out = []
    for _ in range(generations):
        v = rng.lognormal(0, 0.03) * rng.lognormal(0, 0.2, n)
        if stalls:
            v[rng.random(n) < 0.02] *= 5
        out.append(v.tolist())
    return out


def coverage(generations: int, pairs: int, n: int, q: float, stalls: bool) -> float:
    hits = 0
    for s in range(pairs):
        rng = np.random.default_rng(1000 + s)
        a, b = side(rng, generations, n, stalls), side(rng, generations, n, stalls)
        lo, hi = stats.cluster_speedup_interval(a, b, q, 0.0, n=400, seed=s)
        hits += lo <= 1.0 <= hi
    return hits / pairs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generations", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--pairs", type=int, default=100)
    args = ap.parse_args()
    t_975 = stats.t_975
    print("| generations | metric | coverage without scaling | with t(G - 1) scaling |")
    print("|---:|---|---:|---:|")
    for g in args.generations:
        for name, n, q, stalls in METRICS:
            stats.t_975 = lambda nu: stats.Z_975  # type: ignore[assignment]
            plain = coverage(g, args.pairs, n, q, stalls)
            stats.t_975 = t_975  # type: ignore[assignment]
            scaled = coverage(g, args.pairs, n, q, stalls)
            print(f"| {g} | {name} | {plain:.2f} | {scaled:.2f} |", flush=True)


if __name__ == "__main__":
    main()
