"""``perflab overhead``: what isolation costs per variant, fast path (forkserver) vs cold start (spawn),
and what parallel workers buy on a real chapter.

Runs the same trivial variant ``n`` times on each path. Per-variant overhead =
(wall time of the n runs − Σ time inside the measured stages) / n, where the measured stages are
setup, warmup, measurement, check and teardown as the parent saw them; what is left is process start,
imports, pipe traffic and reaping — the price of isolation. The fast path's first variant also pays
for starting the server (one ``import torch``); it is included, and reported apart as well.

``chapter_wall`` times whole ``perflab run`` commands (start-up, MLflow and summary included, as a user
waits for them) on one worker and on k: a warm-up run on one worker first (it fills the compile caches
and creates the store, as a user's first run does), then k workers, then one, all on one store.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.result import VariantSpec
from bench.runner import run_variant

TRIVIAL = '''"""A trivial variant: a tiny tensor op, so the run is almost all harness overhead."""
import torch

from bench.context import context


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
    # Torch's exact CUDA answer first (as `perflab run` has it a few seconds in): on a guess each child
    # would check it with its own cuInit inside "startup", billing ~0.17 s of setup work to isolation.
    from bench.runner import _cuda_available

    _cuda_available()
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
        "path": "cold_start (spawn)" if cold_start else "fast (forkserver)",
        "n": n,
        "wall_s": total,
        "overhead_per_variant_s": sum(per_variant) / n,
        "overhead_first_s": per_variant[0],
        "overhead_median_s": statistics.median(per_variant),
        "overhead_after_first_s": statistics.mean(per_variant[1:]) if n > 1 else None,
        "all_ok": all(s == "ok" for s in statuses),
    }


def run_overhead(n: int = 10, cli_layer: dict[str, Any] | None = None) -> dict[str, Any]:
    """Both paths on the same trivial variant; the fast path first (its server start is counted)."""
    if n < 2:
        raise ValueError(f"n={n} is too small; use at least 2 variants per path")
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
) -> dict[str, Any]:
    """Whole-command wall of ``perflab run -t target`` on ``workers[0]`` and on all of them.

    ``flag`` is ``--gpus`` (``workers`` are GPU indices, one worker each) or ``--jobs`` (CPU: ``workers``
    only counts them). Runs: one worker (warm-up), k workers, one worker; the ratio is run 2 / run 3.
    ``extra``: more ``perflab run`` flags (``--smoke``, ``--device cpu``, ``--chapters-dir D``).
    """
    if flag not in ("--gpus", "--jobs"):
        raise ValueError(f"flag={flag!r} is not one of --gpus, --jobs")
    if len(workers) < 2:
        raise ValueError(f"workers={list(workers)!r}: a comparison needs at least 2 workers")
    one, all_ = (workers[0], ",".join(workers)) if flag == "--gpus" else ("1", str(len(workers)))
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="perflab-wall-") as tmp:
        uri = f"sqlite:///{store or Path(tmp) / 'wall.db'}"
        for label, value in (("warm-up", one), ("k workers", all_), ("one worker", one)):
            cmd = [sys.executable, "-m", "bench.cli", "run", "-t", target, flag, value, "--tracking-uri", uri, *extra]
            t0 = time.monotonic()
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            wall = time.monotonic() - t0
            if store is not None:  # each run's output beside the store, for the record
                log = Path(store).parent / f"wall-{len(runs) + 1}-{label.replace(' ', '_')}.log"
                log.write_text(f"$ {' '.join(cmd)}\n# exit {done.returncode}, {wall:.2f} s\n{done.stdout}{done.stderr}")
            suite = re.search(r"pairs verified in ([0-9.]+) s", done.stdout)
            runs.append({
                "run": label, "workers": len(workers) if label == "k workers" else 1, flag.lstrip("-"): value,
                "exit_code": done.returncode, "wall_s": wall, "suite_wall_s": float(suite.group(1)) if suite else None,
                "tail": (done.stdout + done.stderr)[-2000:] if done.returncode not in (0, 1) else "",
            })  # fmt: skip
    k, single = runs[1], runs[2]
    ok = all(r["exit_code"] in (0, 1) for r in runs)  # 1: the suite ran, some variant failed
    return {
        "target": target,
        "runs": runs,
        "k": len(workers),
        "ratio": k["wall_s"] / single["wall_s"] if ok else None,
        "suite_ratio": k["suite_wall_s"] / single["suite_wall_s"] if ok and k["suite_wall_s"] and single["suite_wall_s"]
        else None,
    }  # fmt: skip


def chapter_wall_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"`perflab run -t {report['target']}` on one worker and on {report['k']}:",
        "",
        "| run | workers | exit | command wall s | suite wall s |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        suite = f"{r['suite_wall_s']:.1f}" if r["suite_wall_s"] is not None else "—"
        lines.append(f"| {r['run']} | {r['workers']} | {r['exit_code']} | {r['wall_s']:.2f} | {suite} |")
    lines.append("")
    if report["ratio"] is None:
        lines.append("No ratio: a run did not complete (see the runs' tails in the JSON).")
    else:
        suite = f"; the suite part alone {report['suite_ratio']:.3f}×" if report["suite_ratio"] else ""
        lines.append(f"{report['k']} workers take {report['ratio']:.3f}× the one-worker wall{suite}.")
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
    if report["cold_over_fast"]:
        lines.append("")
        lines.append(f"Cold start costs {report['cold_over_fast']:.1f}× the fast path's overhead per variant.")
    return "\n".join(lines) + "\n"
