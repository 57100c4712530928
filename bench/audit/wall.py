"""``perflab overhead --chapter-wall``: what parallel workers buy on a real chapter, and whether they change
what it measures.

``chapter_wall`` times whole ``perflab run`` commands (start-up, MLflow and summary included, as a user
waits for them) on one worker and on k: a warm-up run on one worker first (it fills the compile caches,
creates the store and starts the server, as a user's first run does), then k workers, then one, all on
one store, with the server kept from the run before (as when a user runs again); then k and one again,
each with the server stopped before it (as a user's first run after the server's idle exit). It also
compares each variant's median on k workers with one (``moved``), and estimates the ratio had no variant run
slower on k workers (``lane_times``).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def chapter_wall(
    target: str,
    workers: Sequence[str],
    flag: str = "--gpus",
    extra: Sequence[str] = (),
    store: Path | None = None,
    timeout_s: float = 1800.0,
    repeats: int = 1,
) -> dict[str, Any]:
    """Whole-command wall of ``perflab run -t target`` on ``workers[0]`` and on all of them.

    ``flag`` is ``--gpus`` (``workers`` are GPU indices, one worker each) or ``--jobs`` (CPU: ``workers``
    only counts them). Runs: one worker (warm-up), then ``repeats`` × (k workers, one worker) with the
    server kept, then (k, one) each with the server stopped first. ``ratio``: the median over the repeats
    of k / one (a host's run-to-run spread reached ±10 % on the H200 host: one pair of runs is not a
    figure). ``extra``: more ``perflab run`` flags (``--smoke``, ``--device cpu``, ``--chapters-dir D``).
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r}: at least 1")
    if flag not in ("--gpus", "--jobs"):
        raise ValueError(f"flag={flag!r} is not one of --gpus, --jobs")
    if len(workers) < 2:
        raise ValueError(f"workers={list(workers)!r}: a comparison needs at least 2 workers")
    one, all_ = (workers[0], ",".join(workers)) if flag == "--gpus" else ("1", str(len(workers)))
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="perflab-wall-") as tmp:
        uri = f"sqlite:///{store or Path(tmp) / 'wall.db'}"
        tag = (lambda r: f" #{r + 1}") if repeats > 1 else (lambda r: "")
        plan = [("warm-up", one, False)]
        for r in range(repeats):
            plan += [(f"k workers{tag(r)}", all_, False), (f"one worker{tag(r)}", one, False)]
        plan += [("k workers, fresh server", all_, True), ("one worker, fresh server", one, True)]
        for label, value, fresh in plan:
            cmd = [sys.executable, "-m", "perflab", "run", "-t", target, flag, value, "--tracking-uri", uri, *extra]
            log = Path(store).parent / f"wall-{len(runs) + 1}-{_slug(label)}.log" if store is not None else None
            runs.append({"run": label, "workers": len(workers) if value == all_ else 1, flag.lstrip("-"): value,
                         **_command(cmd, fresh, timeout_s, log)})  # fmt: skip
        # Each variant's median on k workers and on one, read back while the store still exists.
        medians = _medians_across(runs, uri)
        estimates = [_no_slowdown(runs[2 + 2 * r], len(workers), uri) for r in range(repeats)]
    no_slowdown = statistics.median(estimates) if estimates and None not in estimates else None
    return {
        "target": target,
        "overlap": os.environ.get("PERFLAB_OVERLAP", "on (default)"),  # perflab run's --overlap, inherited
        "runs": runs, "k": len(workers), "repeats": repeats, **_ratios(runs, repeats), "medians": medians,
        "no_slowdown_ratios": estimates, "no_slowdown_ratio": no_slowdown,
    }  # fmt: skip


def _slug(label: str) -> str:
    return label.replace(", ", "-").replace(" #", "-").replace(" ", "_")


def _stop_servers(python: str) -> None:
    """The servers a ``perflab`` command of ``python`` uses, stopped as it keys them (its import path, not this
    process's): ``perflab server stop`` run by it."""
    subprocess.run([python, "-m", "perflab", "server", "stop"], capture_output=True, timeout=60)


def _command(cmd: list[str], fresh: bool, timeout_s: float, log: Path | None) -> dict[str, Any]:
    """One ``perflab run`` command (after stopping the servers when ``fresh``): its exit, wall, suite wall,
    when its suite began, its parent run; with ``log``, its output kept there."""
    if fresh:
        _stop_servers(cmd[0])
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    wall = time.monotonic() - t0
    if log is not None:  # each run's output beside the store, for the record
        log.write_text(f"$ {' '.join(cmd)}\n# exit {done.returncode}, {wall:.2f} s\n{done.stdout}{done.stderr}")
    said = " ".join(done.stdout.split())  # its lines as one: a sentence wrapped at the terminal's width reads alike
    suite = re.search(r"pairs verified in ([0-9.]+) s", said)
    parent = re.search(r"MLflow parent run ([0-9a-f]{32})", said)
    before = re.search(r"the suite began ([0-9.]+) s after the command started", said)
    return {
        "exit_code": done.returncode, "wall_s": wall, "suite_wall_s": float(suite.group(1)) if suite else None,
        "before_suite_s": float(before.group(1)) if before else None,
        "parent_run_id": parent.group(1) if parent else None,
        "tail": (done.stdout + done.stderr)[-2000:] if done.returncode not in (0, 1) else "",
    }  # fmt: skip


def _ratios(runs: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """k workers / one: each (k, one) pair's, their median (wall and suite part), and the fresh-server pair's."""
    ok = all(r["exit_code"] in (0, 1) for r in runs)  # 1: the suite ran, some variant failed

    def ratio(k: dict[str, Any], single: dict[str, Any], key: str) -> float | None:
        return k[key] / single[key] if ok and k[key] and single[key] else None

    def median_ratio(key: str) -> float | None:
        pairs = [ratio(runs[1 + 2 * r], runs[2 + 2 * r], key) for r in range(repeats)]
        return statistics.median(p for p in pairs if p is not None) if all(p is not None for p in pairs) else None

    return {
        "ratios": [ratio(runs[1 + 2 * r], runs[2 + 2 * r], "wall_s") for r in range(repeats)],
        "ratio": median_ratio("wall_s"),
        "suite_ratio": median_ratio("suite_wall_s"),
        "fresh_server_ratio": ratio(runs[-2], runs[-1], "wall_s"),
        "fresh_server_suite_ratio": ratio(runs[-2], runs[-1], "suite_wall_s"),
    }


def lane_times(timeline: Sequence[dict[str, Any]], k: int) -> list[float]:
    """A one-worker run's examples spread over ``k`` workers as ``run_suite`` orders them (longest first,
    each to the worker free first), each taking as long as it took on one worker: each lane's seconds.

    An example's time is its variants' share of the worker: from the moment each began (its gate opened)
    until the next one began, the last until it ended; so the examples' times add up to the suite's."""
    rows = sorted(timeline, key=lambda t: t["start_s"])
    spans: dict[str, float] = {}
    for i, t in enumerate(rows):
        until = rows[i + 1]["start_s"] if i + 1 < len(rows) else t["end_s"]
        example = t["key"].rsplit(":", 1)[0]
        spans[example] = spans.get(example, 0.0) + until - t["start_s"]
    lanes = [0.0] * k
    for span in sorted(spans.values(), reverse=True):
        lanes[lanes.index(min(lanes))] += span
    return lanes


def _no_slowdown(one: dict[str, Any], k: int, uri: str) -> float | None:
    """The k-worker / one-worker wall ratio if no variant ran slower on k workers than on one: the
    one-worker command's wall, with its suite's last end replaced by the longest of ``lane_times``. What
    the measured ratio has on top is what the workers cost each other (the driver, the host, the parent);
    each worker's first variant, started without a predecessor to start ahead beside, is not counted."""
    if not one.get("parent_run_id") or not one.get("wall_s"):
        return None
    from bench.record.store import read_artifact_text

    try:
        timeline = json.loads(read_artifact_text(one["parent_run_id"], "summary.json", uri)).get("timeline") or []
    except (LookupError, ValueError):  # an estimate only: a run without a readable summary has none
        return None
    if not timeline:
        return None
    last_end = max(t["end_s"] for t in timeline)
    return (one["wall_s"] - last_end + max(lane_times(timeline, k))) / one["wall_s"]


MEDIAN_DEVIATION = 0.05  # a variant whose median on k workers differs more from one worker's is examined


def _medians_across(runs: list[dict[str, Any]], uri: str) -> list[dict[str, Any]]:
    """Per variant: its median (``time_median_ms``) in every run on k workers and in every run on one (the
    warm-up and the fresh-server runs included: each is a measurement of the same code), the median of
    each side, k / one, and whether the k-worker median lies outside the range of the one-worker runs.
    Largest deviation first. Parallel workers must not change what a variant measures: on the H200 x 2
    a host-clocked variant once read 3x slower on two GPUs, which only this comparison showed. A deviation
    inside the one-worker runs' own spread is the host's run-to-run noise, not the workers' doing (ch01's
    host-clocked training_step read 18.8-24.0 ms over four one-worker runs; docs/results/h200x2.md)."""
    from bench.record.store import child_runs

    seen: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        if not run.get("parent_run_id"):
            continue
        side = "k" if run["workers"] > 1 else "one"
        for child in child_runs(run["parent_run_id"], uri):
            median = child.metrics.get("time_median_ms")
            if median is not None and median > 0:
                seen.setdefault(child.name, {"k": [], "one": []})[side].append(median)
    rows = []
    for name, sides in seen.items():
        if sides["k"] and sides["one"]:
            k, one = statistics.median(sides["k"]), statistics.median(sides["one"])
            rows.append({
                "variant": name, "one_ms": one, "k_ms": k, "k_over_one": k / one,
                "k_runs_ms": sides["k"], "one_runs_ms": sides["one"],
                "outside_one_range": not min(sides["one"]) <= k <= max(sides["one"]),
            })  # fmt: skip
    return sorted(rows, key=lambda row: -abs(math.log(row["k_over_one"])))


def _deviates(row: dict[str, Any]) -> bool:
    return abs(row["k_over_one"] - 1.0) > MEDIAN_DEVIATION


def moved(row: dict[str, Any]) -> bool:
    """A variant whose k-worker median differs from one worker's by more than MEDIAN_DEVIATION and lies
    outside the one-worker runs' range: the workers changed what it measures."""
    return _deviates(row) and row.get("outside_one_range", True)


def chapter_wall_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"`perflab run -t {report['target']}` on one worker and on {report['k']} (PERFLAB_OVERLAP: "
        f"{report.get('overlap', 'on (default)')}):",
        "",
        "| run | workers | exit | command wall s | suite wall s | before the suite s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        suite = f"{r['suite_wall_s']:.1f}" if r["suite_wall_s"] is not None else "—"
        before = f"{r['before_suite_s']:.2f}" if r.get("before_suite_s") is not None else "—"
        lines.append(f"| {r['run']} | {r['workers']} | {r['exit_code']} | {r['wall_s']:.2f} | {suite} | {before} |")
    lines += ["", *_ratio_lines(report)]
    if report.get("medians"):
        lines += ["", *_median_lines(report)]
    return "\n".join(lines) + "\n"


def _ratio_lines(report: dict[str, Any]) -> list[str]:
    if report["ratio"] is None:
        return ["No ratio: a run did not complete (see the runs' tails in the JSON)."]
    suite = f"; the suite part alone {report['suite_ratio']:.3f}×" if report["suite_ratio"] else ""
    each = report.get("ratios") or []
    spread = f", median of {len(each)}: {', '.join(f'{r:.3f}' for r in each)}" if len(each) > 1 else ""
    lines = [f"{report['k']} workers take {report['ratio']:.3f}× the one-worker wall{suite} (server kept{spread})."]
    if report.get("no_slowdown_ratio"):
        each = report.get("no_slowdown_ratios") or []
        lines += ["", (
            f"Had no variant run slower on {report['k']} workers than on one: {report['no_slowdown_ratio']:.3f}× "
            f"(each one-worker run's examples, as long as they took there, spread longest first over "
            f"{report['k']} workers; {', '.join(f'{e:.3f}' for e in each)}). The rest is what the workers cost "
            "each other."
        )]  # fmt: skip
    if report.get("fresh_server_ratio"):
        lines += ["", (
            f"With the server stopped before each run: {report['fresh_server_ratio']:.3f}× "
            f"(suite part {report['fresh_server_suite_ratio']:.3f}×)."
        )]  # fmt: skip
    return lines


def _median_lines(report: dict[str, Any]) -> list[str]:
    medians = report["medians"]
    off = [m for m in medians if moved(m)]
    noisy = [m for m in medians if _deviates(m) and not moved(m)]
    lines = [
        f"Medians on {report['k']} workers vs one (each the median of every run on that side): {len(off)} of "
        f"{len(medians)} variants differ by more than {100 * MEDIAN_DEVIATION:.0f} % and lie outside the "
        "one-worker runs' range"
        + (": their numbers from the parallel runs are not to be trusted." if off else ".")
        + (
            f" {len(noisy)} more differ by more than {100 * MEDIAN_DEVIATION:.0f} % but within the one-worker "
            "runs' own spread: the host's run-to-run noise, not told apart from the workers' doing."
            if noisy
            else ""
        ),
        "",
        "| variant | one worker ms | one-worker runs ms | k workers ms | k / one | |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for m in medians[: max(5, len(off) + len(noisy))]:
        runs = m.get("one_runs_ms") or []
        spread = f"{min(runs):.4f}–{max(runs):.4f}" if runs else "—"
        verdict = "moved" if moved(m) else "noise" if _deviates(m) else ""
        lines.append(
            f"| {m['variant']} | {m['one_ms']:.4f} | {spread} | {m['k_ms']:.4f} | {m['k_over_one']:.3f} | {verdict} |"
        )
    return lines
