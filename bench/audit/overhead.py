"""``perflab overhead``: what isolation costs per variant, fast path (a fork of the pre-warmed server,
bench.isolate.server) vs cold start (spawn). What parallel workers buy on a real chapter: bench.audit.wall.

Runs the same trivial variant ``n`` times on each path. Per-variant overhead =
(wall time of the n runs − Σ time inside the measured stages) / n, where the measured stages are
setup, warmup, measurement, check and teardown as the parent saw them; what is left is process start,
imports, pipe traffic and reaping — the price of isolation — and the harness's stages beyond the timed ones
(startup, batch, recheck). Where it goes is reported per variant after the first (``split_s``): each stage's
mean, and ``outside`` (spawn, exit and reaping, the messages: no stage). The server outlives the command; if none
was running (``fresh_server`` stops any first), the fast path's first variant pays for starting it (one
``import torch``): included, and reported apart as well (``overhead_first_s``, ``server_was_running``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.define.result import VariantSpec
from bench.isolate.runner import run_variant

TRIVIAL = '''"""A trivial variant: a tiny tensor op, so the run is almost all harness overhead."""
import torch

from bench import context


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
    stages: list[dict[str, float]] = []
    # Torch's exact CUDA answer first (as `perflab run` has it after its first variant): told a guess, a
    # child checks it with its own cuInit inside "startup", billing ~0.17 s of setup work to isolation.
    from bench.isolate.process import cuda_available

    cuda_available()
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
        spent = {s.name: s.duration_s or 0.0 for s in r.stages}
        stages.append({**spent, "outside": wall - sum(spent.values())})
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
        "split_s": _split(stages[1:] or stages),
    }


def _split(stages: list[dict[str, float]]) -> dict[str, float]:
    """Each stage's mean seconds per variant (a stage a variant did not run counts 0), ``outside`` last."""
    names = list(dict.fromkeys(name for s in stages for name in s if name != "outside")) + ["outside"]
    return {name: sum(s.get(name, 0.0) for s in stages) / len(stages) for name in names}


def measure_suite(n: int, root: Path, cli_layer: dict[str, Any] | None = None) -> dict[str, Any]:
    """The trivial variant as ``n`` examples of one suite (``perflab run``'s path: each child started ahead of its
    gate while the previous one finishes and exits): (the suite's wall − time inside the measured stages) / n."""
    from bench.define.discovery import discover, select
    from bench.isolate.suite import run_suite

    layer = {"iterations": 5, "warmup": 1, **(cli_layer or {})}
    for name, count in (("suite-warm", 1), ("suite", n)):
        for i in range(count):
            path = root / name / "ch00" / f"baseline_trivial{i:03d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(TRIVIAL)
    # One variant first, untimed: a suite's children may need a server of their own (its key covers their
    # environment), which a user's command finds running from the command before.
    run_suite(select(discover(root / "suite-warm")), cli_layer=layer)
    t0 = time.monotonic()
    suite = run_suite(select(discover(root / "suite")), cli_layer=layer)
    wall = time.monotonic() - t0
    inside = sum(s.duration_s or 0.0 for v in suite.variants for s in v.stages if s.name in _MEASURED)
    return {
        "path": "suite (server, started ahead)",
        "n": n,
        "wall_s": wall,
        "overhead_per_variant_s": (wall - inside) / n,
        "all_ok": all(v.status == "ok" for v in suite.variants),
    }


def run_overhead(n: int = 10, cli_layer: dict[str, Any] | None = None, fresh_server: bool = False) -> dict[str, Any]:
    """Both paths on the same trivial variant, the fast path first, then the fast path as a suite. ``fresh_server``:
    stop this user's servers first (killing what their children run), so the first variant's figure includes a
    start."""
    if n < 2:
        raise ValueError(f"n={n} is too small; use at least 2 variants per path")
    if fresh_server:
        from bench.isolate import server

        server.stop_all(keys=server.own_keys())
    with tempfile.TemporaryDirectory(prefix="perflab-overhead-") as tmp:
        fast = measure(n, False, Path(tmp), cli_layer)
        cold = measure(n, True, Path(tmp), cli_layer)
        suite = measure_suite(n, Path(tmp), cli_layer)
    ratio = cold["overhead_per_variant_s"] / fast["overhead_per_variant_s"] if fast["overhead_per_variant_s"] else None
    return {"fast": fast, "cold": cold, "suite": suite, "cold_over_fast": ratio}


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
    lines += ["", "Where a variant's wall goes (after the first; mean s per variant; * = counted as overhead):", ""]
    names = list(dict.fromkeys(n for key in ("fast", "cold") for n in report[key].get("split_s", {})))
    lines.append("| path | " + " | ".join(n + ("" if n in _MEASURED else " *") for n in names) + " |")
    lines.append("|---|" + "---:|" * len(names))
    for key in ("fast", "cold"):
        split = report[key].get("split_s", {})
        lines.append(f"| {report[key]['path']} | " + " | ".join(f"{split.get(n, 0.0):.3f}" for n in names) + " |")
    suite = report.get("suite")
    if suite:
        lines += ["", f"As one suite ({suite['path'].removeprefix('suite ').strip('()')}: what `perflab run` pays "
                      "beyond the measured stages): "
                      f"{suite['overhead_per_variant_s']:.3f} s per variant over {suite['n']}, "
                      f"wall {suite['wall_s']:.2f} s, all ok: {suite['all_ok']}."]  # fmt: skip
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
