"""What logging a variant costs: through a team's MLflow server (PostgreSQL, artifacts proxied) against SQLite.

    python3 scripts/store_overhead.py [--tracking-uri http://host:5000] [--variants 60] [--suites 3]

Without ``--tracking-uri`` it starts the team recipe (deploy/team-server.sh: PostgreSQL and an MLflow server with
2 workers, in a temporary directory, on free ports) and stops it at the end. The results logged are real: one
suite of chapter 7 (transpose, aos_soa; smoke size, CPU) is run once and kept in a spool (its store unwritable on
purpose), then its results are logged ``--variants`` times over, each as ``perflab run`` logs a variant: written
to the spool (``Spool.add``), then uploaded (``Uploader.attempt``: find nothing to resume, create the run, one
``log_batch`` of its tags, metrics and params beside the uploads of ``result.json`` and ``manifest.json``, end
it). Printed per variant, for each store: the wall time of that (median, p90, mean), this process's CPU time in
it, and, for a server this script started, the CPU time of the MLflow server's and PostgreSQL's processes. The
suite logs on a thread of its own, so the wall time is latency the suite does not wait for (unless variants end
faster than they are logged); the CPU time is what a host-clocked measurement could feel beside it, and on a
busy machine the wall time is mostly waiting for a core.

Then what a suite feels: ``perflab run`` of the same examples, ``--suites`` times each without tracking, into
SQLite and into the server, interleaved; the median wall of each (the command's, start to exit) and what the
store added per variant against no tracking.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.record.spool import Spool, find_spools  # noqa: E402
from bench.record.upload import Uploader, quiet_store  # noqa: E402
from tests.services import RECIPE, Team, free_port  # noqa: E402

TARGETS = ["-t", "ch7:transpose", "-t", "ch7:aos_soa", "-t", "ch7:coalescing", "-t", "ch7:vectorized_copy"]


def real_results(tmp: Path) -> Spool:
    """One real suite's results, in a spool (the store given cannot be written, so nothing else happens)."""
    env = {**os.environ, "PERFLAB_RESULTS_DIR": str(tmp / "suite"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "perflab", "run", *TARGETS[:4], "--device", "cpu",
           "--tracking-uri", "sqlite:////proc/perflab-overhead.db"]  # fmt: skip
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    [spool] = find_spools(tmp / "suite" / "spool")
    if len(spool.entries()) != 4:
        raise SystemExit(f"the suite kept {len(spool.entries())} results, not 4: {spool.root}")
    return spool


def server_cpu_s(team: Team | None) -> float:
    """CPU seconds used so far by the MLflow server's processes and PostgreSQL's (0 for a server not started here)."""
    if team is None:
        return 0.0
    import psutil

    postmaster = (team.dir / "pgdata" / "postmaster.pid").read_text().split()[0]
    roots = [int((team.dir / "mlflow.pid").read_text()), int(postmaster)]
    total = 0.0
    for root in roots:
        proc = psutil.Process(root)
        for p in [proc, *proc.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
    return total


def measure(source: Spool, uri: str, n: int, tmp: Path) -> tuple[list[float], list[float]]:
    """Per variant: wall and CPU seconds of keeping it and uploading it, after the store is open."""
    suite = {**source.suite, "tracking_uri": uri, "experiment": "store-overhead", "run_name": f"overhead {uri}"}
    spool = Spool.create(suite, base=tmp / "spools")
    uploader = Uploader(spool)
    uploader.attempt()  # the parent run: MLflow's import and the store's first connection, once per suite
    if uploader.error is not None:
        raise SystemExit(f"{uri}: {uploader.error}")
    entries = source.entries()
    wall, cpu = [], []
    for i in range(n):
        e = entries[i % len(entries)]
        w0, c0 = time.perf_counter(), time.process_time()
        spool.add(e.result(), e.comparison())
        uploader.attempt()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        if uploader.error is not None:
            raise SystemExit(f"{uri}: {uploader.error}")
    return wall, cpu


def suites(uri: str, sqlite: str, repeats: int, tmp: Path) -> dict[str, list[float]]:
    """Wall seconds of ``perflab run`` on TARGETS per store ("none": --no-track), the stores interleaved."""
    env = {**os.environ, "PERFLAB_RESULTS_DIR": str(tmp / "suites"), "PYTHONPATH": str(ROOT)}
    stores = {"none": ["--no-track"], "sqlite": ["--tracking-uri", sqlite], "server": ["--tracking-uri", uri]}
    walls: dict[str, list[float]] = {k: [] for k in stores}
    for _ in range(repeats):
        for name, flags in stores.items():
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "perflab", "run", *TARGETS, "--device", "cpu", *flags],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
            walls[name].append(time.perf_counter() - t0)
            if done.returncode != 0:
                raise SystemExit(f"perflab run ({name}) failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return walls


def line(name: str, wall: list[float], cpu: list[float], server_ms: float | None) -> str:
    ms = sorted(x * 1e3 for x in wall)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    server = f"{server_ms:.1f}" if server_ms is not None else "—"
    return (f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {p90:.1f} | {statistics.fmean(ms):.1f} | "
            f"{statistics.median(cpu) * 1e3:.1f} | {server} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", help="a running MLflow server (default: start the team recipe)")
    parser.add_argument("--variants", type=int, default=60)
    parser.add_argument("--suites", type=int, default=3, help="runs of the suite per store (0: none)")
    args = parser.parse_args()
    quiet_store()
    tmp = Path(tempfile.mkdtemp(prefix="perflab-overhead-"))
    team = None
    try:
        if args.tracking_uri is None:  # under /tmp itself: PostgreSQL's user (nobody, under root) must reach it
            team = Team(Path(tempfile.mkdtemp(prefix="perflab-team-")), free_port(), free_port())
            team.recipe("start")
        uri = args.tracking_uri or team.uri  # type: ignore[union-attr]
        source = real_results(tmp)
        load = os.getloadavg()[0]
        before = server_cpu_s(team)
        served = measure(source, uri, args.variants, tmp)
        server_ms = (server_cpu_s(team) - before) / args.variants * 1e3 if team is not None else None
        filed = measure(source, f"sqlite:///{tmp}/mlflow.db", args.variants, tmp)
        print(f"load average {load:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print("| store | variants | wall median ms | wall p90 ms | wall mean ms | CPU here, median ms |"
              " CPU of server + PostgreSQL, mean ms |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|---:|")
        print(line("MLflow server (PostgreSQL, proxied artifacts)", *served, server_ms))
        print(line("SQLite file", *filed, None))
        wall = statistics.median(served[0]) * 1e3
        print(f"\nlogging a variant through the server: {wall:.1f} ms wall (median), target <= 50 ms: "
              f"{'met' if wall <= 50 else 'NOT met'}")  # fmt: skip
        if args.suites:
            walls = suites(uri, f"sqlite:///{tmp}/mlflow.db", args.suites, tmp)
            n = len(TARGETS) // 2 * 2  # variants: a baseline and an optimized per example
            none = statistics.median(walls["none"])
            print(f"\n`perflab run {' '.join(TARGETS)} --device cpu`, {n} variants, {args.suites} runs per store "
                  "(interleaved):")  # fmt: skip
            print("| store | wall median s | runs s | added per variant vs no tracking ms |")
            print("|---|---:|---|---:|")
            for name, w in walls.items():
                added = (statistics.median(w) - none) / n * 1e3
                print(f"| {name} | {statistics.median(w):.2f} | {', '.join(f'{x:.2f}' for x in w)} | "
                      f"{added:+.0f} |")  # fmt: skip
    finally:
        if team is not None:
            subprocess.run(["bash", str(RECIPE), "stop"], env=team.env(), capture_output=True, timeout=120)
            shutil.rmtree(team.dir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
