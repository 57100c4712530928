"""Run a list of examples: each variant isolated, each optimized variant compared with its baseline.

Nothing is lost: a failing, hanging or crashing variant is recorded with its status and stage and the
suite runs on. Results are handed to the sink as they finish, so an interrupted suite keeps what ran. The
workers, and what may run beside what, are ``bench.isolate.workers``'s.
"""

from __future__ import annotations

import json
import math
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.define.config import Layer, resolve_config
from bench.define.discovery import Example
from bench.define.result import Comparison, SuiteResult
from bench.isolate.holds import Host
from bench.isolate.sink import OnResult, Sink
from bench.isolate.workers import Done, Lane, Pending, Worker


def run_suite(
    examples: Sequence[Example],
    suite_layer: Layer = None,
    cli_layer: Layer = None,
    sink: Sink | None = None,
    on_result: OnResult | None = None,
    workdir: str | Path | None = None,
    keep_workdir: bool = False,
    cold_start: bool = False,
    workers: Sequence[Worker] | None = None,
    expected_s: Mapping[str, float] | None = None,
    overlap: bool = True,
    on_timeline: Callable[[dict[str, Any]], None] | None = None,
) -> SuiteResult:
    """Run every variant of ``examples``, baseline first; compare each optimized with its baseline.

    ``workers``: one environment per parallel worker (``--gpus 0,1`` → one worker per GPU pinned with
    CUDA_VISIBLE_DEVICES; ``--jobs N`` → N plain workers). A whole example runs on one worker, so a
    baseline and its optimized partners share a GPU. Results are returned in example order.
    ``expected_s``: seconds per variant key from an earlier run (``load_durations``); with several
    workers the examples start longest first, so the last to start is a short one and the workers end
    together (unknown examples first of all: they may be the long ones). The order never changes what
    a variant measures, only which worker is idle at the end.
    ``overlap``: start each variant's child ahead, held before its ``setup()`` (bench.isolate.workers, rules
    1 and 2); off with ``cold_start`` (cold numbers) and with profiling (profile children run beside nothing).
    ``on_timeline``: each variant's time-line entry (one per round) as it is recorded, so that a caller whose suite
    is stopped (``KeyboardInterrupt``: no result is returned) keeps the time line of what ran.
    """
    t0 = time.monotonic()
    pool = list(workers or [{}])
    order = list(enumerate(examples))
    if len(pool) > 1 and expected_s:
        order.sort(key=lambda item: -_expected(item[1], expected_s))  # stable: ties keep the suite's order
    pending: queue.SimpleQueue[tuple[int, Example]] = queue.SimpleQueue()
    for item in order:
        pending.put(item)
    done = Done()
    timeline: list[dict[str, Any]] = []

    def record(entry: dict[str, Any]) -> None:
        timeline.append(entry)
        if on_timeline is not None:
            on_timeline(entry)

    run_lanes(pending, done, record, pool, suite_layer, cli_layer, sink=sink, on_result=on_result,
              workdir=workdir, keep_workdir=keep_workdir, cold_start=cold_start, overlap=overlap, t0=t0)  # fmt: skip
    return _suite_result(examples, done, timeline, time.monotonic() - t0)


def run_lanes(
    pending: Pending, done: Done, record: Callable[[dict[str, Any]], None], pool: Sequence[Worker],
    suite_layer: Layer = None, cli_layer: Layer = None, *, sink: Sink | None = None, on_result: OnResult | None = None,
    workdir: str | Path | None = None, keep_workdir: bool = False, cold_start: bool = False, overlap: bool = True,
    t0: float | None = None, names: Sequence[str] | None = None,
) -> None:  # fmt: skip
    """One host's workers, a ``Lane`` per environment of ``pool``, taking examples from ``pending`` until it is
    empty; their results go to ``done``, ``sink`` and ``on_result``, each variant's time-line entry to ``record``
    (its ``worker``: the lane's index, or ``names[index]``)."""
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="perflab-"))
    t0 = time.monotonic() if t0 is None else t0
    overlap = overlap and not cold_start and not resolve_config(suite_layer, cli_layer).enable_profiling
    host = Host(sink)
    host.lanes = [
        Lane(
            pending,
            done,
            root,
            suite_layer,
            cli_layer,
            sink,
            on_result,
            cold_start,
            env,
            lambda entry, i=i: record({**entry, "worker": names[i] if names else i}),
            t0,
            keep_workdir,
            host,
        )  # fmt: skip
        for i, env in enumerate(pool)
    ]
    try:
        if len(pool) == 1:
            host.lanes[0].run(overlap)
        else:
            with ThreadPoolExecutor(max_workers=len(pool), thread_name_prefix="perflab-worker") as ex:
                futures = [ex.submit(lane.run, overlap) for lane in host.lanes]
                try:
                    for future in futures:
                        future.result()  # re-raise a harness error from any worker
                except BaseException:  # Ctrl-C or a signal here: the workers would otherwise run the suite out
                    host.stop()
                    raise
    finally:
        drain = getattr(sink, "drain", None)
        if drain is not None:  # the results still queued may point into the work directory (profiles)
            drain()
        if not keep_workdir:
            shutil.rmtree(root, ignore_errors=True)


def _suite_result(
    examples: Sequence[Example], done: Done, timeline: list[dict[str, Any]], wall_s: float
) -> SuiteResult:
    """Results and comparisons in example order (variants in file order), whatever order they finished in."""
    position = {(i, spec.key): n for i, e in enumerate(examples) for n, spec in enumerate(e.variants)}
    by = done.by_example
    variants = [v for i in sorted(by) for v in sorted(by[i][0], key=lambda v: position[(i, v.spec.key)])]
    comparisons = [c for i in sorted(by) for c in sorted(by[i][1], key=lambda c: position[(i, _key(c))])]
    unpaired = [e.target for e in examples if not e.optimized]
    return SuiteResult(variants=variants, comparisons=comparisons, unpaired=unpaired, wall_s=wall_s,
                       timeline=sorted(timeline, key=lambda t: t["start_s"]))  # fmt: skip


def expected_order(examples: Sequence[Example], expected_s: Mapping[str, float] | None) -> list[int]:
    """Indices of ``examples``, the longest first by the last run's times (unknown ones first of all); ties, and
    every example without ``expected_s``, in the suite's order."""
    order = range(len(examples))
    return sorted(order, key=lambda i: -_expected(examples[i], expected_s)) if expected_s else list(order)


def _expected(example: Example, expected_s: Mapping[str, float]) -> float:
    """Seconds the example took last time (the sum of its variants'); infinite when any is unknown."""
    known = [expected_s.get(spec.key) for spec in example.variants]
    return math.inf if any(k is None for k in known) else float(sum(k for k in known if k is not None))


def expected_note(
    examples: Sequence[Example], expected_s: Mapping[str, float], workers: int = 1, limit_s: float | None = None
) -> str | None:
    """A line before a suite starts: how long the last run of these variants took here (``expected_s``: seconds
    per variant key, ``load_durations``; summed, over ``workers``), how many it has not timed, and whether
    ``limit_s`` (``--suite-timeout``) would cut the suite. None where it timed none of them."""
    keys = [spec.key for e in examples for spec in e.variants]
    known = [expected_s[k] for k in keys if k in expected_s]
    if not known:
        return None
    total = sum(known) / max(workers, 1)
    span = f"{total:.0f} s" if total < 120 else f"{total / 60:.1f} min"
    note = f"expected: ~{span} from these variants' last run here"
    note += f", shared by {workers} workers" if workers > 1 else ""
    new = len(keys) - len(known)
    note += f"; {new} of {len(keys)} not timed before, not counted" if new else ""
    if limit_s is not None and total > limit_s:
        note += f"; more than --suite-timeout {limit_s:g} s: what has not finished by then is named, not run"
    return note


def _key(comparison: Comparison) -> str:
    return f"{comparison.chapter}:{comparison.example}:{comparison.variant}"


def load_durations(path: str | Path, signature: str) -> dict[str, float]:
    """Seconds per variant key recorded by ``save_durations`` under ``signature`` (device, sizes); {} if none."""
    try:
        data = json.loads(Path(path).read_text())
        table = data.get(signature, {})
        return {str(k): float(v) for k, v in table.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}  # a hint only: no file, or one this version cannot read


def save_durations(path: str | Path, signature: str, suite: SuiteResult) -> None:
    """Add this suite's per-variant worker time (run + compare, over its rounds) to ``path``, under ``signature``."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        data = {}  # none yet, or unreadable: start again
    try:
        if not isinstance(data, dict):
            data = {}
        table = data.setdefault(signature, {})
        spent: dict[str, float] = {}
        for t in suite.timeline:  # a variant's rounds (bench.isolate.rounds) summed
            spent[t["key"]] = spent.get(t["key"], 0.0) + t["run_s"] + t["compare_s"]
        table.update({k: round(v, 3) for k, v in spent.items()})
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f"{p.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(p)
    except (OSError, ValueError):
        pass  # a hint only: never fail a suite over it
