"""Where each run of ``perflab overhead --chapter-wall`` spent its time (issue 4): read back from its store.

For every run in ``chapter_wall.json`` (warm-up, k workers, one worker, ...): its time breakdown and
timeline (each variant: worker, start, run, ahead, late at the gate, comparison, end; from the parent
run's summary.json), then per run the sum over its variants of each stage and start-up metric (from the
variant runs), so one can see which stage grew on k workers. Run it where the store's artifacts are (the
artifact paths in the store are absolute). Usage:
``python scripts/timing/wall_tables.py OUT_DIR`` (the directory holding chapter_wall.json and .db).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.record.store import child_runs, read_artifact_text  # noqa: E402

METRICS = (
    "elapsed_s", "stage_startup_s", "cuda_start_s", "gate_late_s", "ahead_s", "stage_setup_s", "stage_warmup_s",
    "stage_measurement_s", "stage_check_s", "stage_teardown_s",
)  # fmt: skip


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    report = json.loads((out / "chapter_wall.json").read_text())
    uri = f"sqlite:///{(out / 'chapter_wall.db').resolve()}"
    totals = []
    for run in report["runs"]:
        parent = run.get("parent_run_id")
        print(f"== {run['run']}: workers {run['workers']}, command wall {run['wall_s']:.2f} s, exit {run['exit_code']}")
        if not parent:
            continue
        try:
            summary = json.loads(read_artifact_text(parent, "summary.json", uri))
        except LookupError as exc:
            print(f"   no summary: {exc}")
            continue
        b = summary.get("time_breakdown") or {}
        print("   " + ", ".join(f"{k} {v:.2f}" for k, v in b.items() if isinstance(v, int | float)))
        for t in sorted(summary.get("timeline") or [], key=lambda t: (t["worker"], t["start_s"])):
            print(
                f"   w{t['worker']} {t['key']:38s} start {t['start_s']:6.2f} run {t['run_s']:5.2f} "
                f"ahead {t.get('ahead_s', 0.0):5.2f} late {t.get('late_s', 0.0):5.2f} "
                f"compare {t['compare_s']:5.2f} end {t['end_s']:6.2f}"
            )
        sums = dict.fromkeys(METRICS, 0.0)
        for child in child_runs(parent, uri):
            for k in METRICS:
                sums[k] += child.metrics.get(k) or 0.0
        totals.append((run["run"], sums))
    print()
    print(f"{'run':28s}" + "".join(f"{k.replace('stage_', ''):>14s}" for k in METRICS))
    for name, sums in totals:
        print(f"{name:28s}" + "".join(f"{sums[k]:14.2f}" for k in METRICS))


if __name__ == "__main__":
    main()
