"""``perflab overhead``: what isolation costs per variant, fast path (a fork of the pre-warmed server,
bench.isolate.server) vs cold start (spawn), and what parallel workers buy on a real chapter.

Runs the same trivial variant ``n`` times on each path. Per-variant overhead =
(wall time of the n runs − Σ time inside the measured stages) / n, where the measured stages are
setup, warmup, measurement, check and teardown as the parent saw them; what is left is process start,
imports, pipe traffic and reaping — the price of isolation. The server outlives the command; if none was
running (``fresh_server`` stops any first), the fast path's first variant pays for starting it (one
``import torch``): included, and reported apart as well (``overhead_first_s``, ``server_was_running``).

``chapter_wall`` times whole ``perflab run`` commands (start-up, MLflow and summary included, as a user
waits for them) on one worker and on k: a warm-up run on one worker first (it fills the compile caches,
creates the store and starts the server, as a user's first run does), then k workers, then one, all on
one store, with the server kept from the run before (as when a user runs again); then k and one again,
each with the server stopped before it (as a user's first run after the server's idle exit).
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

from bench.define.result import VariantSpec
from bench.isolate.runner import run_variant

TRIVIAL = '''"""A trivial variant: a tiny tensor op, so the run is almost all harness overhead."""
import torch

from bench.define.context import context


class Trivial:
    def setup(self):
        self.x = torch.randn(256, device=context().device)
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        torch.mul(self.x, 2.0, out=self.out)

    def teardown(self):
        del self.x, self.out

    def get_output(self):
        return self.out


def get_benchmark():
    return Trivial()
'''

_MEASURED = ("setup", "warmup", "measurement", "check", "teardown")


def measure(n: int, cold_start: bool, root: Path, cli_layer: dict[str, Any] | None = None) -> dict[str, Any]:
    path = root / "ch00" / "baseline_trivial.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TRIVIAL)
    spec = VariantSpec(chapter="ch00", example="trivial", variant="baseline", path=str(path))
    layer = {"iterations": 5, "warmup": 1, **(cli_layer or {})}
    per_variant: list[float] = []
    statuses: list[str] = []
    # Torch's exact CUDA answer first (as `perflab run` has it after its first variant): told a guess, a
    # child checks it with its own cuInit inside "startup", billing ~0.17 s of setup work to isolation.
    from bench.isolate.runner import _cuda_available

    _cuda_available()
    from bench.isolate import server

    running = bool(server.servers())
    t_start = time.monotonic()
    for i in range(n):
        t0 = time.monotonic()
        workdir = root / ("cold" if cold_start else "fast") / str(i)
        r = run_variant(spec, workdir, cli_layer=layer, cold_start=cold_start)
        wall = time.monotonic() - t0
        inside = sum(s.duration_s or 0.0 for s in r.stages if s.name in _MEASURED)
        per_variant.append(wall - inside)
        statuses.append(r.status)
    total = time.monotonic() - t_start
    return {
        "path": "cold_start (spawn)" if cold_start else "fast (server)",
        "server_was_running": None if cold_start else running,
        "n": n,
        "wall_s": total,
        "overhead_per_variant_s": sum(per_variant) / n,
        "overhead_first_s": per_variant[0],
        "overhead_median_s": statistics.median(per_variant),
        "overhead_after_first_s": statistics.mean(per_variant[1:]) if n > 1 else None,
        "all_ok": all(s == "ok" for s in statuses),
    }


def run_overhead(n: int = 10, cli_layer: dict[str, Any] | None = None, fresh_server: bool = False) -> dict[str, Any]:
    """Both paths on the same trivial variant; the fast path first. ``fresh_server``: stop this user's
    servers first (killing what their children run), so the first variant's figure includes a start."""
    if n < 2:
        raise ValueError(f"n={n} is too small; use at least 2 variants per path")
    if fresh_server:
        from bench.isolate import server

        server.stop_all()
    with tempfile.TemporaryDirectory(prefix="perflab-overhead-") as tmp:
        fast = measure(n, False, Path(tmp), cli_layer)
        cold = measure(n, True, Path(tmp), cli_layer)
    ratio = cold["overhead_per_variant_s"] / fast["overhead_per_variant_s"] if fast["overhead_per_variant_s"] else None
    return {"fast": fast, "cold": cold, "cold_over_fast": ratio}


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
            if fresh:
                from bench.isolate import server

                server.stop_all()
            cmd = [sys.executable, "-m", "perflab", "run", "-t", target, flag, value, "--tracking-uri", uri, *extra]
            t0 = time.monotonic()
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            wall = time.monotonic() - t0
            if store is not None:  # each run's output beside the store, for the record
                name = label.replace(", ", "-").replace(" #", "-").replace(" ", "_")
                log = Path(store).parent / f"wall-{len(runs) + 1}-{name}.log"
                log.write_text(f"$ {' '.join(cmd)}\n# exit {done.returncode}, {wall:.2f} s\n{done.stdout}{done.stderr}")
            suite = re.search(r"pairs verified in ([0-9.]+) s", done.stdout)
            parent = re.search(r"MLflow parent run\s+([0-9a-f]{32})", done.stdout)
            before = re.search(r"the suite began ([0-9.]+) s after the command started", done.stdout)
            runs.append({
                "run": label, "workers": len(workers) if value == all_ else 1, flag.lstrip("-"): value,
                "exit_code": done.returncode, "wall_s": wall, "suite_wall_s": float(suite.group(1)) if suite else None,
                "before_suite_s": float(before.group(1)) if before else None,
                "parent_run_id": parent.group(1) if parent else None,
                "tail": (done.stdout + done.stderr)[-2000:] if done.returncode not in (0, 1) else "",
            })  # fmt: skip
        # Each variant's median on k workers and on one, read back while the store still exists.
        medians = _medians_across(runs, uri)
        estimates = [_no_slowdown(runs[2 + 2 * r], len(workers), uri) for r in range(repeats)]
    ok = all(r["exit_code"] in (0, 1) for r in runs)  # 1: the suite ran, some variant failed

    def ratio(k: dict[str, Any], single: dict[str, Any], key: str) -> float | None:
        return k[key] / single[key] if ok and k[key] and single[key] else None

    def median_ratio(key: str) -> float | None:
        pairs = [ratio(runs[1 + 2 * r], runs[2 + 2 * r], key) for r in range(repeats)]
        return statistics.median(p for p in pairs if p is not None) if all(p is not None for p in pairs) else None

    return {
        "target": target,
        "overlap": os.environ.get("PERFLAB_OVERLAP", "on (default)"),  # perflab run's --overlap, inherited
        "split_pairs": os.environ.get("PERFLAB_SPLIT_PAIRS", "off (default)"),  # --split-pairs, inherited
        "runs": runs,
        "k": len(workers),
        "repeats": repeats,
        "ratios": [ratio(runs[1 + 2 * r], runs[2 + 2 * r], "wall_s") for r in range(repeats)],
        "ratio": median_ratio("wall_s"),
        "suite_ratio": median_ratio("suite_wall_s"),
        "fresh_server_ratio": ratio(runs[-2], runs[-1], "wall_s"),
        "fresh_server_suite_ratio": ratio(runs[-2], runs[-1], "suite_wall_s"),
        "medians": medians,
        "no_slowdown_ratios": estimates,
        "no_slowdown_ratio": statistics.median(estimates) if estimates and None not in estimates else None,
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
    (session 7) a host-clocked variant read 3x slower on two GPUs, which only this comparison showed. A
    deviation inside the one-worker runs' own spread is the host's run-to-run noise, not the workers'
    doing (session 8: ch01's host-clocked training_step read 18.8-24.0 ms over four one-worker runs)."""
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
        f"{report.get('overlap', 'on (default)')}; PERFLAB_SPLIT_PAIRS: {report.get('split_pairs', 'off (default)')}):",
        "",
        "| run | workers | exit | command wall s | suite wall s | before the suite s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        suite = f"{r['suite_wall_s']:.1f}" if r["suite_wall_s"] is not None else "—"
        before = f"{r['before_suite_s']:.2f}" if r.get("before_suite_s") is not None else "—"
        lines.append(f"| {r['run']} | {r['workers']} | {r['exit_code']} | {r['wall_s']:.2f} | {suite} | {before} |")
    lines.append("")
    if report["ratio"] is None:
        lines.append("No ratio: a run did not complete (see the runs' tails in the JSON).")
    else:
        suite = f"; the suite part alone {report['suite_ratio']:.3f}×" if report["suite_ratio"] else ""
        each = report.get("ratios") or []
        spread = f", median of {len(each)}: {', '.join(f'{r:.3f}' for r in each)}" if len(each) > 1 else ""
        lines.append(
            f"{report['k']} workers take {report['ratio']:.3f}× the one-worker wall{suite} (server kept{spread})."
        )
        if report.get("no_slowdown_ratio"):
            each = report.get("no_slowdown_ratios") or []
            lines.append("")
            lines.append(
                f"Had no variant run slower on {report['k']} workers than on one: {report['no_slowdown_ratio']:.3f}× "
                f"(each one-worker run's examples, as long as they took there, spread longest first over "
                f"{report['k']} workers; {', '.join(f'{e:.3f}' for e in each)}). The rest is what the workers cost "
                "each other."
            )
        if report.get("fresh_server_ratio"):
            lines.append("")
            lines.append(
                f"With the server stopped before each run: {report['fresh_server_ratio']:.3f}× "
                f"(suite part {report['fresh_server_suite_ratio']:.3f}×)."
            )
    medians = report.get("medians") or []
    if medians:
        off = [m for m in medians if moved(m)]
        noisy = [m for m in medians if _deviates(m) and not moved(m)]
        lines.append("")
        lines.append(
            f"Medians on {report['k']} workers vs one (each the median of every run on that side): {len(off)} of "
            f"{len(medians)} variants differ by more than {100 * MEDIAN_DEVIATION:.0f} % and lie outside the "
            "one-worker runs' range"
            + (": their numbers from the parallel runs are not to be trusted." if off else ".")
            + (
                f" {len(noisy)} more differ by more than {100 * MEDIAN_DEVIATION:.0f} % but within the one-worker "
                "runs' own spread: the host's run-to-run noise, not told apart from the workers' doing."
                if noisy
                else ""
            )
        )
        lines.append("")
        lines.append("| variant | one worker ms | one-worker runs ms | k workers ms | k / one | |")
        lines.append("|---|---:|---:|---:|---:|---|")
        for m in medians[: max(5, len(off) + len(noisy))]:
            runs = m.get("one_runs_ms") or []
            spread = f"{min(runs):.4f}–{max(runs):.4f}" if runs else "—"
            verdict = "moved" if moved(m) else "noise" if _deviates(m) else ""
            ratio = f"{m['k_over_one']:.3f}"
            lines.append(f"| {m['variant']} | {m['one_ms']:.4f} | {spread} | {m['k_ms']:.4f} | {ratio} | {verdict} |")
    return "\n".join(lines) + "\n"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| path | variants | wall s | overhead / variant s | first s | median s | after the first s | all ok |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key in ("fast", "cold"):
        r = report[key]
        after = f"{r['overhead_after_first_s']:.3f}" if r["overhead_after_first_s"] is not None else "—"
        lines.append(
            f"| {r['path']} | {r['n']} | {r['wall_s']:.2f} | {r['overhead_per_variant_s']:.3f} | "
            f"{r['overhead_first_s']:.3f} | {r['overhead_median_s']:.3f} | {after} | {r['all_ok']} |"
        )
    running = report["fast"].get("server_was_running")
    if running is not None:
        lines.append("")
        lines.append(
            "The server was already running: no variant paid for its start."
            if running
            else "No server was running: the fast path's first variant includes starting one (its imports)."
        )
    if report["cold_over_fast"]:
        lines.append("")
        lines.append(f"Cold start costs {report['cold_over_fast']:.1f}× the fast path's overhead per variant.")
    return "\n".join(lines) + "\n"
