"""A/A pairs: every example of the given chapters run against an identical copy of its own baseline.

The speedup of an A/A pair is 1 by construction; its 95 % interval (over the pair's interleaved rounds,
bench.measure.rounds) must hold 1.0 in at least 95 % of pairs, or the interval is too narrow for the run-to-run
spread it claims to cover (issues 19, 42). Writes a chapters tree under a temporary directory (each
baseline_<x>.py beside an optimized_<x>.py with the same content), runs it through the harness like
`perflab run`, and prints one row per pair, its rounds and the coverage; `--out DIR` keeps aa.json.

    python3 scripts/aa_pairs.py 7 1 --repeats 2 --out $OUT
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # a script run from anywhere: the repository's packages (chapters, bench)

from bench.define.discovery import chapter_id, default_chapters_dir, discover, select  # noqa: E402
from bench.define.result import Comparison  # noqa: E402
from bench.isolate.suite import run_suite  # noqa: E402


def aa_tree(chapters: list[str], dest: Path, only: set[str] | None = None) -> Path:
    """Each baseline of ``chapters`` (of the examples ``only`` names, when given) beside a copy of itself."""
    src = default_chapters_dir()
    for ch in chapters:
        cid = chapter_id(ch)
        (dest / cid).mkdir(parents=True)
        for base in sorted((src / cid).glob("baseline_*.py")):
            if only and base.stem.removeprefix("baseline_") not in only:
                continue
            shutil.copy(base, dest / cid / base.name)
            shutil.copy(base, dest / cid / base.name.replace("baseline_", "optimized_", 1))
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+", help="chapter numbers, e.g. 7 1")
    parser.add_argument("--repeats", type=int, default=1, help="suites to run (pairs pooled)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", default="", help="examples to pair, comma-separated (default: every one)")
    parser.add_argument("--round-children", choices=("auto", "kept", "fresh"), default=None,
                        help="which children time the later rounds (default: the config's, auto)")  # fmt: skip
    args = parser.parse_args()
    rows: list[dict] = []
    print("| pair | repeat | speedup | 95 % interval | holds 1.0 | rounds |\n|---|---:|---:|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory(prefix="perflab-aa-") as tmp:
        catalog = discover(aa_tree(args.chapters, Path(tmp) / "chapters", set(filter(None, args.only.split(",")))))
        for repeat in range(args.repeats):
            for chapter in args.chapters:  # a suite per chapter: a run cut short keeps the rows printed so far
                layer = {"round_children": args.round_children} if args.round_children else None
                work = Path(tmp) / f"work{repeat}-{chapter}"
                suite = run_suite(select(catalog, chapter), cli_layer=layer, workdir=work)
                for c in suite.comparisons:
                    rows.append(_row(c, repeat))
                    _print_row(rows[-1])
                if args.out:
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / "aa.json").write_text(json.dumps(rows, indent=1))
    measured = [r for r in rows if r["ci_low"] is not None]
    held = sum(r["holds_1"] for r in measured)
    verdicts = sum(r["significance"] in ("faster", "slower") for r in measured)  # beyond the noise threshold
    rounds = sorted(r["rounds"] for r in measured) or [0]
    print(f"\nrounds per pair: median {rounds[len(rounds) // 2]}, max {rounds[-1]}")
    print(f"{held}/{len(measured)} A/A intervals hold 1.0 ({100 * held / max(len(measured), 1):.0f} %); "
          f"{verdicts} read a verdict (target: at most 5 %)")  # fmt: skip


def _row(c: Comparison, repeat: int) -> dict:
    holds = c.speedup_ci_low is not None and c.speedup_ci_low <= 1.0 <= (c.speedup_ci_high or 0)
    return {
        "pair": f"{c.chapter}:{c.example}", "repeat": repeat, "status": c.status,
        "speedup": c.speedup, "ci_low": c.speedup_ci_low, "ci_high": c.speedup_ci_high,
        "holds_1": holds, "time": c.speedup_time, "significance": c.significance,
        "rounds": len(c.round_speedups) or 1, "rounds_stop": c.rounds_stop,
    }  # fmt: skip


def _print_row(r: dict) -> None:
    """One pair's row, printed as its suite ends (a pair without an interval: its status)."""
    if r["ci_low"] is None:
        print(f"| {r['pair']} | {r['repeat']} | — | {r['status']} | — | — |", flush=True)
        return
    print(f"| {r['pair']} | {r['repeat']} | {r['speedup']:.4f} | [{r['ci_low']:.4f}, {r['ci_high']:.4f}] | "
          f"{'yes' if r['holds_1'] else 'NO'} | {r['rounds']} {r['rounds_stop'] or ''} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
