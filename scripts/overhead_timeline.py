"""Where a trivial variant's wall goes between the stages `perflab overhead` reports: the parent's view of one
fast-path child, message by message.

`perflab overhead` splits a variant's wall into the child's stages and ``outside`` (no stage). This probe names the
parts of ``outside``: the server's fork (``spawn``: its stale-code check and fork()), the gaps between the child's
messages (a gap between one stage's end and the next one's start is harness code outside any stage, such as the
clock's construction before the warm-up), and ``done`` until the child's exit status is in (the child's exit: on a
GPU, its CUDA context torn down). It times the same trivial variant as `perflab overhead` (bench.audit.overhead),
``n`` times in a row with the server running, and prints each gap's median (ms) over the variants after the first,
then the server's own counters (stale-code check and fork, per spawn).

    python3 scripts/overhead_timeline.py 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # a script run from anywhere: the repository's packages

from bench.audit.overhead import TRIVIAL  # noqa: E402
from bench.define.result import VariantSpec  # noqa: E402
from bench.isolate import outcome, runner, server  # noqa: E402
from bench.isolate.process import cuda_available  # noqa: E402

MARKS: list[tuple[float, str]] = []


def _mark(label: str) -> None:
    MARKS.append((time.monotonic(), label))


def instrument() -> None:
    """Timestamps on every message the parent handles, around the server's fork and around the reaping."""
    handle, spawn, reap = outcome.Watch.handle, server.spawn, runner._Child._reap

    def on_message(self: Any, msg: dict[str, Any]) -> None:
        _mark(":".join(str(x) for x in (msg.get("t"), msg.get("name"), msg.get("event")) if x))
        handle(self, msg)

    def on_spawn(*args: Any, **kwargs: Any) -> Any:
        _mark("spawn requested")
        child = spawn(*args, **kwargs)
        _mark("spawn answered")
        return child

    def on_reap(proc: Any, watch: Any, kill: bool) -> bool:
        _mark("pipe closed (child exited)")
        timed_out = reap(proc, watch, kill)
        _mark("exit status in")
        return timed_out

    outcome.Watch.handle = on_message  # type: ignore[method-assign]
    server.spawn = on_spawn  # type: ignore[assignment]
    runner._Child._reap = staticmethod(on_reap)  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=10, help="variants in a row (the first is left out)")
    args = parser.parse_args()
    cuda_available()  # as `perflab overhead`: the children are told the exact answer, not a guess to check
    instrument()
    gaps: dict[str, list[float]] = defaultdict(list)
    walls = []
    with tempfile.TemporaryDirectory(prefix="perflab-timeline-") as tmp:
        path = Path(tmp) / "ch00" / "baseline_trivial.py"
        path.parent.mkdir(parents=True)
        path.write_text(TRIVIAL)
        spec = VariantSpec(chapter="ch00", example="trivial", variant="baseline", path=str(path))
        for i in range(args.n):
            MARKS.clear()
            _mark("begin")
            result = runner.run_variant(spec, Path(tmp) / str(i), cli_layer={"iterations": 5, "warmup": 1})
            _mark("result built")
            if i == 0 or result.status != "ok":
                continue
            walls.append(MARKS[-1][0] - MARKS[0][0])
            for (ta, a), (tb, b) in zip(MARKS, MARKS[1:], strict=False):
                gaps[f"{a} -> {b}"].append(1e3 * (tb - ta))
    print(f"{len(walls)} variants after the first; wall median {1e3 * statistics.median(walls):.1f} ms")
    print("| median ms | max ms | from -> to |\n|---:|---:|---|")
    for label, ms in gaps.items():
        print(f"| {statistics.median(ms):.2f} | {max(ms):.2f} | {label} |")
    for status in server.servers():
        spawns = max(int(status.get("spawns") or 0), 1)
        check, fork = (1e3 * float(status.get(k) or 0.0) / spawns for k in ("check_s", "fork_s"))
        print(f"server {status.get('key')}: {spawns} spawns, {status.get('files_checked')} files checked; "
              f"per spawn: stale-code check {check:.2f} ms, fork {fork:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
