"""A table of chapters run one ``perflab run --out DIR/chN`` each (gpu_session.sh's ``book`` step): per chapter its
command wall, variants, per-variant elapsed (median, max and the slowest), the pairs' rounds and why they stopped,
how many later rounds ran in a kept child (the time line's ``launch``), how many variants' timing named a round on a
slow host CPU (each variant's result.json, bench.measure.hostspeed), and where the time went (the summary's
``stages_s``, and with one worker "other": the children's run time outside those stages, the harness's own).
Small enough for a device call's output.

    python3 scripts/timing/book_table.py DIR [WALLS]   # WALLS: a file of "chN SECONDS EXIT" lines
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

PARTS = ("start", "setup", "warmup", "measurement", "checks", "batch", "energy", "profile", "teardown", "logging")


def walls(path: Path | None) -> dict[str, tuple[float, str]]:
    if path is None or not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[parts[0]] = (float(parts[1]), parts[2])
    return out


def kept_rounds(summary: dict) -> str:
    """Later rounds (1 on) whose child was round 0's, kept: "kept 8/24"; "—" where no pair ran a second round."""
    later = [t for t in summary.get("timeline") or [] if (t.get("round") or 0) > 0]
    return f"kept {sum(t.get('launch') == 'kept' for t in later)}/{len(later)}" if later else "—"


def slow_host(chapter_dir: Path) -> str:
    """Variants whose rounds' timing names a round on a slow host CPU, of those measured in rounds: "2/8"."""
    slow = rounds = 0
    for path in chapter_dir.glob("*/*/*/result.json"):
        timing = json.loads(path.read_text()).get("timing") or {}
        if len(timing.get("rounds") or []) > 1:
            rounds += 1
            slow += any(str(n).startswith("host CPU slow") for n in timing.get("notes") or [])
    return f"{slow}/{rounds}" if rounds else "—"


def other_s(summary: dict) -> str:
    """The split's " other N": with one worker, the seconds it was busy (its children's start to exit, and after
    each the comparison, profile children and logging) outside the summed stages: the harness's own work between
    them, a process's end; "" with several workers (their stages overlap) or none."""
    times = summary.get("time_breakdown") or {}
    if times.get("workers") != 1 or times.get("run_s") is None:
        return ""
    busy = times["run_s"] + sum(t.get("compare_s", 0.0) + t.get("other_s", 0.0) for t in summary.get("timeline", []))
    return f" other {busy - sum((summary.get('stages_s') or {}).values()):.0f}"


def row(name: str, summary: dict, wall: tuple[float, str] | None, chapter_dir: Path | None = None) -> str:
    variants = summary.get("variants", [])
    elapsed = [v["elapsed_s"] for v in variants if v.get("elapsed_s") is not None]
    slowest = max(variants, key=lambda v: v.get("elapsed_s") or 0.0, default=None)
    pairs = summary.get("pairs", [])
    rounds = [len(p["round_speedups"]) for p in pairs if p.get("round_speedups")]
    stops = Counter(p.get("rounds_stop") or "no rounds" for p in pairs)
    skipped = sum(v.get("status") == "skipped" for v in variants)
    stages = summary.get("stages_s", {})
    split = " ".join(f"{k} {stages[k]:.0f}" for k in PARTS if stages.get(k))
    split += other_s(summary)
    left = len(summary.get("not_finished") or [])
    cells = [
        name,
        f"{wall[0]:.0f} (exit {wall[1]})" if wall else "—",
        f"{summary.get('n_variants_ok', 0)}/{summary.get('n_variants', 0)}"
        + (f", {skipped} skipped" if skipped else "")
        + (f", +{left} not run" if left else ""),
        f"{statistics.median(elapsed):.1f} / {max(elapsed):.1f}" if elapsed else "—",
        f"{slowest['key'].split(':', 1)[1]} {slowest['elapsed_s']:.0f}" if slowest else "—",
        f"{statistics.mean(rounds):.1f}" if rounds else "—",
        ", ".join(f"{k} {n}" for k, n in stops.most_common()),
        kept_rounds(summary),
        slow_host(chapter_dir) if chapter_dir is not None else "—",
        split,
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    root = Path(sys.argv[1])
    wall = walls(Path(sys.argv[2]) if len(sys.argv) > 2 else None)
    print("| chapter | wall s | ok/variants | elapsed s per variant (median / max) | slowest s | rounds per pair | "
          "rounds stop | later rounds | host slow | stages s (summed over variants) |")  # fmt: skip
    print("|---|---:|---:|---:|---|---:|---|---|---:|---|")
    names = sorted({p.name for p in root.iterdir() if p.is_dir()} | set(wall), key=lambda n: int(n[2:]))
    for name in names:
        path = root / name / "summary.json"
        summary = json.loads(path.read_text()) if path.is_file() else {}
        print(row(name, summary, wall.get(name), root / name))
    total = sum(w for w, _ in wall.values())
    print(f"\nwhole: {total:.0f} s over {len(wall)} chapters")


if __name__ == "__main__":
    main()
