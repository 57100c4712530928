"""What the restore comparison's rounds catch and what they cost (bench.isolate.recheck.more_rounds with the
verdict of bench.measure.judge), simulated on the CPU:

* an honest variant on a busy host: both sides' calls ``base`` ms, each slowed at random (half of them, by an
  exponential with mean ``--slow``): how often it is judged invalid, and the rounds it takes;
* the same on a host whose load comes in bursts: on and off for runs of calls (``--burst`` calls on average),
  a call slowed while it is on (a CI host's other tests starting and ending);
* skipped work: calls from the set-up state drawn from ``--a`` and calls holding what the timed calls left from
  ``--b`` (by default the rounds an H100 measured for tests/bench/test_exploits.py's ``optimized_mutated``,
  which sorts its input in place): how often it is caught.

    python3 scripts/timing/restore_rounds_sim.py [--n 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.isolate.recheck import more_rounds  # noqa: E402
from bench.measure.judge import skipped_work  # noqa: E402

H100_A = [0.6777, 0.6036, 0.4294, 0.2164, 0.5120, 0.4680, 0.4421, 0.2236]  # ms, 2026-11-26
H100_B = [0.2304, 0.2233, 0.1256, 0.2202, 0.2821, 0.2921, 0.2938, 0.1509]


def judged(draw_a: Callable[[], float], draw_b: Callable[[], float]) -> tuple[bool, int]:
    """(invalid, rounds): the rounds as the child runs them, the verdict as the judge gives it."""
    a: list[float] = []
    b: list[float] = []
    while more_rounds(a, b, len(a)):
        if len(a) % 2 == 0:  # A B, then B A (bench.isolate.recheck._rounds)
            a.append(draw_a())
            b.append(draw_b())
        else:
            b.append(draw_b())
            a.append(draw_a())
    return skipped_work(a, b), len(a)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20000, help="simulated variants per case")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--base", type=float, default=0.2, help="an honest call's time, ms")
    p.add_argument("--slow", type=float, default=0.8, help="mean slow-down of a slowed call (0.8 = +80 %%)")
    p.add_argument("--burst", type=float, default=6.0, help="bursty load: mean calls a burst (and a pause) lasts")
    p.add_argument("--a", type=float, nargs="+", default=H100_A, help="skipped work: calls from the set-up state")
    p.add_argument("--b", type=float, nargs="+", default=H100_B, help="skipped work: calls holding what was left")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)

    def busy() -> float:
        return args.base * (1 + (rng.exponential(args.slow) if rng.random() < 0.5 else 0.0))

    load = {"on": False}

    def bursty() -> float:  # on and off for geometric runs of calls, a call slowed while it is on
        if rng.random() < 1 / args.burst:
            load["on"] = not load["on"]
        return args.base * (1 + (rng.exponential(args.slow) if load["on"] else 0.0))

    honest = [judged(busy, busy) for _ in range(args.n)]
    burst = [judged(bursty, bursty) for _ in range(args.n)]
    fake = [judged(lambda: float(rng.choice(args.a)), lambda: float(rng.choice(args.b))) for _ in range(args.n)]
    print("| case | judged invalid | rounds: median | max |")
    print("|---|---:|---:|---:|")
    for name, runs in (("honest, busy host", honest), ("honest, load in bursts", burst), ("skipped work", fake)):
        rounds = [r for _, r in runs]
        rate = sum(i for i, _ in runs) / len(runs)
        print(f"| {name} | {rate:.4%} | {statistics.median(rounds):.0f} | {max(rounds)} |")


if __name__ == "__main__":
    main()
