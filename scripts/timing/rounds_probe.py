"""A/A pairs on this host, measured one side after the other and in interleaved rounds: how often each reads a
verdict ("faster" or "slower") where there is none. A 95 % interval allows 5 %.

Writes a chapters tree of A/A examples (the same file on both sides) of two CPU ops: a 160x160 fp32 matmul (an
intra-op-parallel op, two threads on a 2-core host: the one that waits for a busy core) and a 1M-element add; runs
them through the harness as `perflab run` does, once per design: ``one`` (a child per side, the design before
rounds), ``rounds3`` (three rounds, fixed), ``adaptive`` (the defaults: at least 3 rounds, until ±2 % or decided,
at most 8). Prints each design's verdict counts, rounds and wall time. Figures depend on the host's load: say
what else ran when quoting them.

    python3 scripts/timing/rounds_probe.py --pairs 40 --designs one adaptive

``--chapter 7`` instead runs that chapter's own pairs twice back to back (the defaults, at smoke size on a CPU)
and prints each pair's two verdicts: none may read "faster" in one run and "slower" in the other.

    python3 scripts/timing/rounds_probe.py --chapter 7
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # a script run from anywhere: the repository's packages

from bench.define.discovery import default_chapters_dir, discover, select  # noqa: E402
from bench.isolate.suite import run_suite  # noqa: E402

OPS = {  # the op, and the output it writes
    "matmul160": ("torch.matmul(self.a, self.b, out=self.out)", "self.out"),
    "add1m": ("torch.add(self.x, self.y, out=self.sum)", "self.sum"),
}
BENCH = """import torch


class Bench:
    def setup(self):
        self.a, self.b, self.out = torch.randn(160, 160), torch.randn(160, 160), torch.empty(160, 160)
        self.x, self.y, self.sum = torch.randn(1 << 20), torch.randn(1 << 20), torch.empty(1 << 20)

    def benchmark_fn(self):
        {op}

    def get_output(self):
        return {out}

    def teardown(self):
        pass


def get_benchmark():
    return Bench()
"""
DESIGNS = {
    "one": {"min_rounds": 1, "max_rounds": 1},
    "rounds3": {"min_rounds": 3, "max_rounds": 3},
    "adaptive": {},
    "adaptive_keep": {"busy_rounds": "keep"},  # the defaults, every round counted however busy the host was
}


def tree(dest: Path, pairs: int) -> Path:
    """``pairs`` A/A examples, the ops taking turns."""
    ops = list(OPS.items())
    for i in range(pairs):
        name, (op, out) = ops[i % len(ops)]
        for side in ("baseline", "optimized"):
            path = dest / "ch07" / f"{side}_{name}_{i:03d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(BENCH.format(op=op, out=out))
    return dest


def twice(chapter: str, designs: list[str]) -> None:
    """The chapter's pairs run twice back to back per design: each pair's two verdicts, and the flips."""
    examples = select(discover(default_chapters_dir()), [chapter])
    print("| design | pair | first | second |\n|---|---|---|---|")
    for design in designs:
        runs = []
        with tempfile.TemporaryDirectory(prefix="perflab-twice-") as tmp:
            for n in range(2):
                layer = {"device": "cpu", **DESIGNS[design]}
                suite = run_suite(examples, cli_layer=layer, workdir=Path(tmp) / str(n))
                runs.append({(c.example, c.variant): c for c in suite.comparisons})
        flips = 0
        for key, first in runs[0].items():
            second = runs[1].get(key)
            a, b = first.significance, second.significance if second else None
            flips += {a, b} == {"faster", "slower"}
            texts = [f"{c.significance} {c.speedup:.3f} [{c.speedup_ci_low:.3f}, {c.speedup_ci_high:.3f}] "
                     f"r{len(c.round_speedups) or 1}" if c and c.speedup_ci_low else str(c and c.status)
                     for c in (first, second)]  # fmt: skip
            print(f"| {design} | {key[0]}:{key[1]} | {texts[0]} | {texts[1]} |", flush=True)
        print(f"\n{design}: {flips} of {len(runs[0])} pairs read faster in one run and slower in the other\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--designs", nargs="+", default=["one", "adaptive"], choices=list(DESIGNS))
    parser.add_argument("--chapter", default=None, help="run this chapter's own pairs twice instead, e.g. 7")
    args = parser.parse_args()
    if args.chapter:
        twice(args.chapter, args.designs)
        return
    with tempfile.TemporaryDirectory(prefix="perflab-rounds-") as tmp:
        examples = select(discover(tree(Path(tmp) / "chapters", args.pairs)))
        print(
            "| design | pairs | faster | slower | no significant difference | rounds (median) | capped | "
            "rounds left out (pairs) | wall s |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for design in args.designs:
            t0 = time.monotonic()
            layer = {"device": "cpu", **DESIGNS[design]}
            suite = run_suite(examples, cli_layer=layer, workdir=Path(tmp) / design)
            wall = time.monotonic() - t0
            verdicts = [c.significance for c in suite.comparisons]
            rounds = sorted(max(len(c.round_speedups), 1) for c in suite.comparisons)
            capped = sum(any("capped" in n for n in (v.timing.notes if v.timing else [])) for v in suite.variants)
            left = [len(c.rounds_left_out) for c in suite.comparisons]  # host busy in them (busy_rounds)
            print(f"| {design} | {len(verdicts)} | {verdicts.count('faster')} | {verdicts.count('slower')} | "
                  f"{verdicts.count('no significant difference')} | {rounds[len(rounds) // 2] if rounds else '-'} | "
                  f"{capped}/{len(suite.variants)} | {sum(left)} ({sum(n > 0 for n in left)}) | {wall:.0f} |",
                  flush=True)  # fmt: skip
            for c in suite.comparisons:
                if c.significance != "no significant difference":
                    rounds_text = [round(r, 3) for r in c.round_speedups]
                    print(f"    {c.example}: {c.status} {c.speedup} [{c.speedup_ci_low}, {c.speedup_ci_high}] "
                          f"{c.significance}, rounds {rounds_text}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
