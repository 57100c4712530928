"""Run a list of examples: each variant isolated, each optimized variant compared with its baseline.

Nothing is lost: a failing, hanging or crashing variant is recorded with its status and stage and the
suite runs on. Results are handed to the tracker as they finish, so an interrupted suite keeps what ran.
"""

from __future__ import annotations

import json
import math
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from bench.compare import compare
from bench.config import Layer
from bench.discovery import Example
from bench.errors import PerflabError
from bench.result import Comparison, SuiteResult, VariantResult
from bench.runner import run_variant


class Sink(Protocol):
    """Where finished results go (the MLflow tracker, a test's list)."""

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str: ...


OnResult = Callable[[VariantResult, Comparison | None], None]


class BackgroundSink:
    """A sink opened and fed on a thread of its own, so the suite waits neither for it nor on it.

    ``open_sink`` builds the real sink (for MLflow: import mlflow and open the store, ~10 s on a GPU host,
    ~5 s of it a new SQLite store's migrations) while the first variants already run; results queue until
    it is ready and are logged in the order they finished, and logging one never holds up the next
    variant. A sink that fails to open or to log stops the suite before its next variant (``check``, which
    ``run_suite`` calls): nothing may run that cannot be recorded. ``close`` waits until everything queued
    is logged and returns the sink (for its summary), or raises what went wrong.
    """

    def __init__(self, open_sink: Callable[[], Sink]) -> None:
        self._queue: queue.SimpleQueue[tuple[VariantResult, Comparison | None] | None] = queue.SimpleQueue()
        self._sink: Sink | None = None
        self._error: BaseException | None = None
        self._lost: list[str] = []  # variants queued but never logged, because the sink failed
        self._t0 = time.monotonic()
        self.ready_s: float | None = None  # seconds from creation until the sink was open
        self.wait_s: float | None = None  # seconds ``close`` waited for the queue to drain
        self._thread = threading.Thread(target=self._loop, args=(open_sink,), name="perflab-sink", daemon=True)
        self._thread.start()

    def _loop(self, open_sink: Callable[[], Sink]) -> None:
        try:
            self._sink = open_sink()
        except BaseException as exc:  # recorded, raised by check/close in the suite's threads
            self._error = exc
        self.ready_s = time.monotonic() - self._t0
        while (item := self._queue.get()) is not None:
            if self._error is not None:
                self._lost.append(item[0].spec.key)
                continue
            try:
                self._sink.log_variant(*item)  # type: ignore[union-attr]
            except BaseException as exc:
                self._error = exc
                self._lost.append(item[0].spec.key)

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str:
        """Queue one result; returns at once (the run id is not known yet: "")."""
        self._queue.put((result, comparison))
        return ""

    def check(self) -> None:
        """Raise if the sink failed: the suite must not start another variant it cannot record."""
        if self._error is not None:
            lost = f"; not logged: {', '.join(self._lost)}" if self._lost else ""
            raise PerflabError(f"results cannot be logged ({type(self._error).__name__}: {self._error}){lost}") from (
                self._error
            )

    def close(self) -> Sink:
        """Wait until every queued result is logged; the opened sink, or the error that stopped it."""
        t0 = time.monotonic()
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self.wait_s = time.monotonic() - t0
        self.check()
        assert self._sink is not None
        return self._sink


Worker = Mapping[str, str]  # environment of one worker, e.g. {"CUDA_VISIBLE_DEVICES": "1"}


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
) -> SuiteResult:
    """Run every variant of ``examples``, baseline first; compare each optimized with its baseline.

    ``workers``: one environment per parallel worker (``--gpus 0,1`` → one worker per GPU pinned with
    CUDA_VISIBLE_DEVICES; ``--jobs N`` → N plain workers). A whole example runs on one worker, so a
    baseline and its optimized partners share a GPU. Results are returned in example order.
    ``expected_s``: seconds per variant key from an earlier run (``load_durations``); with several
    workers the examples start longest first, so the last to start is a short one and the workers end
    together (unknown examples first of all: they may be the long ones). The order never changes what
    a variant measures, only which worker is idle at the end.
    """
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="perflab-"))
    t0 = time.monotonic()
    pool = list(workers or [{}])
    order = list(enumerate(examples))
    if len(pool) > 1 and expected_s:
        order.sort(key=lambda item: -_expected(item[1], expected_s))
    pending: queue.SimpleQueue[tuple[int, Example]] = queue.SimpleQueue()
    for item in order:
        pending.put(item)
    done: dict[int, tuple[list[VariantResult], list[Comparison]]] = {}
    timeline: list[dict[str, Any]] = []

    def work(index_of_worker: int, env: Worker) -> None:
        while True:
            try:
                index, example = pending.get_nowait()
            except queue.Empty:
                return
            done[index] = _run_example(
                example, root, suite_layer, cli_layer, sink, on_result, cold_start, env,
                lambda entry: timeline.append({**entry, "worker": index_of_worker}), t0,
            )  # fmt: skip
            if not keep_workdir:  # compared: a long suite must not keep every output on disk (1 GiB each here)
                for spec in example.variants:
                    shutil.rmtree(root / spec.chapter / spec.example / spec.variant / "outputs", ignore_errors=True)

    try:
        if len(pool) == 1:
            work(0, pool[0])
        else:
            with ThreadPoolExecutor(max_workers=len(pool), thread_name_prefix="perflab-worker") as ex:
                for future in [ex.submit(work, i, env) for i, env in enumerate(pool)]:
                    future.result()  # re-raise a harness error from any worker
    finally:
        if not keep_workdir:
            shutil.rmtree(root, ignore_errors=True)
    variants = [v for i in sorted(done) for v in done[i][0]]
    comparisons = [c for i in sorted(done) for c in done[i][1]]
    unpaired = [e.target for e in examples if not e.optimized]
    return SuiteResult(
        variants=variants,
        comparisons=comparisons,
        unpaired=unpaired,
        wall_s=time.monotonic() - t0,
        timeline=sorted(timeline, key=lambda t: t["start_s"]),
    )


def _expected(example: Example, expected_s: Mapping[str, float]) -> float:
    known = [expected_s.get(spec.key) for spec in example.variants]
    return math.inf if any(k is None for k in known) else float(sum(k for k in known if k is not None))


def _run_example(
    example: Example,
    root: Path,
    suite_layer: Layer,
    cli_layer: Layer,
    sink: Sink | None,
    on_result: OnResult | None,
    cold_start: bool,
    env: Worker,
    record: Callable[[dict[str, Any]], None] = lambda entry: None,
    t0: float = 0.0,
) -> tuple[list[VariantResult], list[Comparison]]:
    variants: list[VariantResult] = []
    comparisons: list[Comparison] = []
    baseline = None
    check = getattr(sink, "check", None)  # a BackgroundSink that failed stops the suite
    for spec in example.variants:
        if check is not None:
            check()
        wd = root / spec.chapter / spec.example / spec.variant
        start = time.monotonic()
        result = run_variant(
            spec, wd, suite_layer=suite_layer, cli_layer=cli_layer, cold_start=cold_start, env=dict(env)
        )
        ran = time.monotonic()
        if result.status == "ok" and result.config.get("enable_profiling"):
            # After the timed child has exited, in children of their own: no profiler overhead in the
            # samples, and the same GPU (the worker's) as the timed run.
            from bench.profiling import profile_variant

            result.profile = profile_variant(
                spec, wd, suite_layer, cli_layer, timed=result, cold_start=cold_start, env=dict(env)
            ).profile
        comparison = None
        compare_s = 0.0
        if spec.is_baseline:
            baseline = result
        elif baseline is not None:
            c0 = time.monotonic()
            comparison = compare(baseline, result, in_server=not cold_start)
            compare_s = time.monotonic() - c0
            comparisons.append(comparison)
        variants.append(result)
        if sink is not None:
            sink.log_variant(result, comparison)
        if on_result is not None:
            on_result(result, comparison)
        end = time.monotonic()
        record({
            "key": spec.key, "start_s": start - t0, "run_s": ran - start, "compare_s": compare_s,
            "other_s": end - ran - compare_s, "end_s": end - t0,
        })  # fmt: skip
    return variants, comparisons


def load_durations(path: str | Path, signature: str) -> dict[str, float]:
    """Seconds per variant key recorded by ``save_durations`` under ``signature`` (device, sizes); {} if none."""
    try:
        data = json.loads(Path(path).read_text())
        table = data.get(signature, {})
        return {str(k): float(v) for k, v in table.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}  # a hint only: no file, or one this version cannot read


def save_durations(path: str | Path, signature: str, suite: SuiteResult) -> None:
    """Add this suite's per-variant worker time (run + compare) to ``path``, under ``signature``."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        data = {}  # none yet, or unreadable: start again
    try:
        if not isinstance(data, dict):
            data = {}
        table = data.setdefault(signature, {})
        for t in suite.timeline:
            table[t["key"]] = round(t["run_s"] + t["compare_s"], 3)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f"{p.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(p)
    except (OSError, ValueError):
        pass  # a hint only: never fail a suite over it
