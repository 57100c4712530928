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
from bench.config import Layer, host_clocked, resolve_config
from bench.discovery import Example
from bench.errors import PerflabError
from bench.result import Comparison, SuiteResult, VariantResult, VariantSpec
from bench.runner import KILL_GRACE_S, Cancelled, Gate, run_variant


class Sink(Protocol):
    """Where finished results go (the MLflow tracker, a test's list)."""

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str: ...


OnResult = Callable[[VariantResult, Comparison | None], None]


class _Marker:
    """Queued by ``BackgroundSink.drain``: set once everything queued before it has been handled."""

    def __init__(self, done: threading.Event) -> None:
        self.done = done


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
        self._queue: queue.SimpleQueue[tuple[VariantResult, Comparison | None] | _Marker | None] = queue.SimpleQueue()
        self._sink: Sink | None = None
        self._error: BaseException | None = None
        self._lost: list[str] = []  # variants queued but never logged, because the sink failed
        self._t0 = time.monotonic()
        # Opening and logging are CPU-bound Python (MLflow's import, SQLite): a host-clocked measurement
        # runs while neither does (``hold``; ``_Host``).
        self._lock = threading.Lock()
        self._busy = True  # opening, or logging one result
        self._go = threading.Event()  # clear while held: no result is logged
        self._go.set()
        self.opened = threading.Event()  # the sink is open, or failed to open
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
        with self._lock:
            self._busy = False
        self.opened.set()
        while (item := self._queue.get()) is not None:
            if isinstance(item, _Marker):
                item.done.set()
                continue
            if self._error is not None:
                self._lost.append(item[0].spec.key)
                continue
            while True:  # not while held
                self._go.wait()
                with self._lock:
                    if self._go.is_set():
                        self._busy = True
                        break
            try:
                self._sink.log_variant(*item)  # type: ignore[union-attr]
            except BaseException as exc:
                self._error = exc
                self._lost.append(item[0].spec.key)
            finally:
                with self._lock:
                    self._busy = False

    def hold(self) -> bool:
        """Stop logging (results queue meanwhile) if the sink is idle now: open and not logging; False
        (nothing held) otherwise. ``release`` lets it go on."""
        with self._lock:
            if self._busy:
                return False
            self._go.clear()
            return True

    def release(self) -> None:
        self._go.set()

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

    def drain(self) -> None:
        """Wait until every result queued so far is logged (or the sink failed): files a result points to
        (a profile's trace) must still exist when it is logged."""
        self.release()
        done = threading.Event()
        self._queue.put(_Marker(done))
        while self._thread.is_alive() and not done.wait(0.1):
            pass

    def close(self) -> Sink:
        """Wait until every queued result is logged; the opened sink, or the error that stopped it."""
        t0 = time.monotonic()
        self.release()  # never held past the suite
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
    overlap: bool = True,
    split_pairs: bool = False,
) -> SuiteResult:
    """Run every variant of ``examples``, baseline first; compare each optimized with its baseline.

    ``workers``: one environment per parallel worker (``--gpus 0,1`` → one worker per GPU pinned with
    CUDA_VISIBLE_DEVICES; ``--jobs N`` → N plain workers). A whole example runs on one worker, so a
    baseline and its optimized partners share a GPU. Results are returned in example order.
    ``expected_s``: seconds per variant key from an earlier run (``load_durations``); with several
    workers the examples start longest first, so the last to start is a short one and the workers end
    together (unknown examples first of all: they may be the long ones). The order never changes what
    a variant measures, only which worker is idle at the end.
    ``overlap``: on a worker, start each variant's child once the previous variant's measurement has
    ended, and hold it before its ``setup()`` until that variant is over (``runner.Gate``): its start-up
    and CUDA context overlap the previous one's output check, exit and comparison, never a measurement.
    Off with ``cold_start`` (cold numbers) and when profiling is asked for (profile children then run
    beside no other context).
    ``split_pairs`` (several workers, ``expected_s`` known): an example expected to take longer than the
    whole suite's share of one worker (``_split``) would alone set the suite's wall; its variants are
    queued one by one instead, so its baseline and optimized run side by side on two workers (GPUs of
    the same model: ``compare`` refuses a speedup across models) and the comparison says so
    (``Comparison.across_gpus``). Other examples stay whole.
    """
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="perflab-"))
    t0 = time.monotonic()
    pool = list(workers or [{}])
    items: list[tuple[int, Example, list[VariantSpec]]] = [(i, e, list(e.variants)) for i, e in enumerate(examples)]
    if len(pool) > 1 and expected_s:
        if split_pairs:
            items = _split(items, expected_s, len(pool))
        items.sort(key=lambda item: -_expected(item[2], expected_s))
    pending: queue.SimpleQueue[tuple[int, Example, list[VariantSpec]]] = queue.SimpleQueue()
    for item in items:
        pending.put(item)
    pairs = _Pairs()
    timeline: list[dict[str, Any]] = []
    overlap = overlap and not cold_start and not resolve_config(suite_layer, cli_layer).enable_profiling

    host = _Host(sink)
    lanes = [
        _Lane(
            pending, pairs, root, suite_layer, cli_layer, sink, on_result, cold_start, env,
            lambda entry, i=i: timeline.append({**entry, "worker": i}), t0, keep_workdir, host,
        )  # fmt: skip
        for i, env in enumerate(pool)
    ]
    host.lanes = lanes

    def work(index_of_worker: int, env: Worker) -> None:
        lanes[index_of_worker].run(overlap)

    try:
        if len(pool) == 1:
            work(0, pool[0])
        else:
            with ThreadPoolExecutor(max_workers=len(pool), thread_name_prefix="perflab-worker") as ex:
                for future in [ex.submit(work, i, env) for i, env in enumerate(pool)]:
                    future.result()  # re-raise a harness error from any worker
    finally:
        drain = getattr(sink, "drain", None)
        if drain is not None:  # the results still queued may point into the work directory (profiles)
            drain()
        if not keep_workdir:
            shutil.rmtree(root, ignore_errors=True)
    done = pairs.done
    position = {(i, spec.key): n for i, e in enumerate(examples) for n, spec in enumerate(e.variants)}
    variants = [v for i in sorted(done) for v in sorted(done[i][0], key=lambda v: position[(i, v.spec.key)])]
    comparisons = [c for i in sorted(done) for c in sorted(done[i][1], key=lambda c: position[(i, _key(c))])]
    unpaired = [e.target for e in examples if not e.optimized]
    return SuiteResult(
        variants=variants,
        comparisons=comparisons,
        unpaired=unpaired,
        wall_s=time.monotonic() - t0,
        timeline=sorted(timeline, key=lambda t: t["start_s"]),
    )


def _expected(specs: Sequence[VariantSpec], expected_s: Mapping[str, float]) -> float:
    known = [expected_s.get(spec.key) for spec in specs]
    return math.inf if any(k is None for k in known) else float(sum(k for k in known if k is not None))


def _split(
    items: list[tuple[int, Example, list[VariantSpec]]], expected_s: Mapping[str, float], workers: int
) -> list[tuple[int, Example, list[VariantSpec]]]:
    """Each example expected to take longer than the suite's share of one worker (total / workers) as one
    item per variant; the rest as they are. Nothing is split while any duration is unknown."""
    times = [_expected(specs, expected_s) for _, _, specs in items]
    if not all(math.isfinite(t) for t in times):
        return items
    share = sum(times) / workers
    out: list[tuple[int, Example, list[VariantSpec]]] = []
    for (index, example, specs), t in zip(items, times, strict=True):
        split = t > share and len(specs) > 1
        out += [(index, example, [spec]) for spec in specs] if split else [(index, example, specs)]
    return out


def _key(comparison: Comparison) -> str:
    return f"{comparison.chapter}:{comparison.example}:{comparison.variant}"


class _Pairs:
    """What the workers share: each example's results and comparisons, its baseline once finished, the
    optimized results that finished before their baseline (a split example, ``run_suite(split_pairs=)``),
    and how many of its variants are done. One lock: a baseline is logged before it becomes visible, so
    its optimized partners are always logged after it (their runs name the baseline's)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: dict[int, tuple[list[VariantResult], list[Comparison]]] = {}
        self.baseline: dict[int, VariantResult] = {}
        self.waiting: dict[int, list[VariantResult]] = {}
        self.compared: dict[int, int] = {}  # variants of the example finished and, if optimized, compared


class _Host:
    """A host-bound measurement (``bench.config.host_clocked``) runs alone on the host. On the H200 x 2
    (session 7, call Z2) chapter 1's training_step baseline (pageable copies) read 64.0 ms on two GPUs
    against 20.5 ms on one, while every GPU-clocked variant read the same on both.

    A host-bound child stops after its set-up, before its warm-up (runner's ``before_measure``); with
    several workers every child does. A host-bound one goes on only once the sink is open (MLflow's import
    and store: seconds of CPU-bound Python in this process) and then once everything else is quiet: every
    other worker (no child of theirs doing anything: each gone, held at a gate with its CUDA context made,
    or set up and waiting to measure; no comparison running), its own worker (the previous variant's
    comparison and logging, which may run beside the next variant: ``_compare_beside``), and the sink (not
    logging; held until the measurement ends). Meanwhile no other worker starts a child, opens a gate,
    compares or measures (``checkpoint``). Set-up is not measured: it runs beside the others. GPU-clocked
    measurements run side by side as before: another worker's children moved none of them (chapters 1
    and 7, H200 x 2, session 7)."""

    def __init__(self, sink: Any = None) -> None:
        self.cond = threading.Condition()
        self.owner: _Lane | None = None  # the worker whose measurement runs alone, or waits to
        self.lanes: list[_Lane] = []
        self.sink = sink if hasattr(sink, "hold") else None  # a BackgroundSink; others log in _finish
        self.held = False  # the sink held for the owner's measurement

    def checkpoint(self, lane: _Lane, cancel: threading.Event | None = None) -> None:
        """Before ``lane`` starts a child, opens a gate, compares or measures: wait while another runs alone."""
        with self.cond:
            while self.owner is not None and self.owner is not lane:
                if cancel is not None and cancel.is_set():
                    raise Cancelled("cancelled while another worker measured alone")
                self.cond.wait(0.05)

    def alone(self, lane: _Lane, cancel: threading.Event) -> None:
        while self.sink is not None and not self.sink.opened.wait(0.05):  # the others run on meanwhile
            if cancel.is_set():
                raise Cancelled("cancelled while waiting to measure alone")
        with self.cond:
            while self.owner is not None and self.owner is not lane:
                if cancel.is_set():
                    raise Cancelled("cancelled while waiting to measure alone")
                self.cond.wait(0.05)
            self.owner = lane
            while not self._quiet_but(lane):
                if cancel.is_set():
                    self.owner = None
                    self.cond.notify_all()
                    raise Cancelled("cancelled while waiting to measure alone")
                self.cond.wait(0.01)  # polled: children end and reach gates without telling

    def _quiet_but(self, lane: _Lane) -> bool:
        """Nothing but ``lane``'s measurement runs: the other workers and ``lane``'s own comparison quiet,
        and the sink idle (then held: the last condition, taken only when the others hold)."""
        if lane.finishing or not all(other.quiet() for other in self.lanes if other is not lane):
            return False
        if self.sink is not None and not self.held:
            self.held = self.sink.hold()
        return self.sink is None or self.held

    def release(self, lane: _Lane) -> None:
        with self.cond:
            if self.owner is lane:
                self.owner = None
                if self.held:
                    self.sink.release()
                    self.held = False
                self.cond.notify_all()


class _Started:
    """One variant's ``run_variant`` on a thread of its own. ``measured`` is set once the child's
    measurement has ended (or the run is over): the moment the next variant may start ahead."""

    def __init__(
        self,
        item: tuple[int, Example, VariantSpec],
        wd: Path,
        gate: Gate | None,
        lane: _Lane,
        **kwargs: Any,
    ) -> None:
        self.item = item
        self.gate = gate
        self.lane = lane  # its worker
        self.measured = threading.Event()
        self.cancelled = threading.Event()
        self.admitting = False  # set up, at its measure gate (runner's before_measure): waiting to measure
        self.alone_wait_s: float | None = None
        self.started = time.monotonic()
        self._result: VariantResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._go, args=(item[2], wd, kwargs), name=f"perflab-{item[2].key}", daemon=True
        )
        self._thread.start()

    def _go(self, spec: VariantSpec, wd: Path, kwargs: dict[str, Any]) -> None:
        try:
            self._result = run_variant(
                spec, wd, gate=self.gate, on_measured=self._measured, cancel=self.cancelled,
                before_measure=self._admit,
                # one worker: only a host-bound child stops (it waits for its own worker's comparison and
                # the sink); several: every child, so that the others can be parked while one measures alone
                measure_gate="all" if len(self.lane.host.lanes) > 1 else "host_bound",
                **kwargs,
            )  # fmt: skip
        except BaseException as exc:  # raised again by result(), on the worker's thread
            self._error = exc
        finally:
            self._measured()

    def _measured(self) -> None:
        self.lane.host.release(self.lane)  # a host-bound measurement is over: the others go on
        self.measured.set()

    def _admit(self, config: Any, device: str | None = None) -> None:
        """Set up, before its warm-up (runner's ``before_measure``): a host-bound measurement waits to be
        alone on the host; any other waits while one is."""
        t0 = time.monotonic()
        self.admitting = True
        try:
            if host_clocked(config, device):
                self.lane.host.alone(self.lane, self.cancelled)
                self.alone_wait_s = time.monotonic() - t0
            else:
                self.lane.host.checkpoint(self.lane, self.cancelled)
        finally:
            self.admitting = False

    def parked(self) -> bool:
        """Its child does nothing on the host now: gone, held at a closed gate with its CUDA context made,
        or set up and waiting to measure."""
        if not self._thread.is_alive() or self.admitting:
            return True
        return self.gate is not None and not self.gate.is_open() and self.gate.arrived.is_set()

    def wait_measured(self) -> None:
        while not self.measured.wait(0.5):  # in slices: the main thread stays interruptible (Ctrl-C)
            pass

    def result(self) -> VariantResult:
        while self._thread.is_alive():
            self._thread.join(0.5)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def cancel(self) -> None:
        """Kill its child (an interrupted suite) and wait until the thread is done with it."""
        self.cancelled.set()
        self._thread.join(KILL_GRACE_S + 15.0)


class _Lane:
    """One worker: takes examples from the shared queue and runs their variants one after another, each
    started ahead (``overlap``) while the previous one finishes; compares, logs and records them."""

    def __init__(
        self,
        pending: queue.SimpleQueue[tuple[int, Example, list[VariantSpec]]],
        pairs: _Pairs,
        root: Path,
        suite_layer: Layer,
        cli_layer: Layer,
        sink: Sink | None,
        on_result: OnResult | None,
        cold_start: bool,
        env: Worker,
        record: Callable[[dict[str, Any]], None],
        t0: float,
        keep_workdir: bool,
        host: _Host,
    ) -> None:
        self.pending, self.pairs, self.root, self.sink, self.on_result = pending, pairs, root, sink, on_result
        self.suite_layer, self.cli_layer, self.cold_start, self.env = suite_layer, cli_layer, cold_start, env
        self.record, self.t0, self.keep_workdir = record, t0, keep_workdir
        self._queue: list[tuple[int, Example, VariantSpec]] = []  # the rest of the current item
        self.host = host  # what the workers share
        self.children: list[_Started] = []  # its children not yet finished (current, ahead)
        self.finishing = False  # comparing and logging a finished variant
        self.done = False

    def quiet(self) -> bool:
        """Nothing of this worker's runs on the host (``_Host``): its children parked, no comparison."""
        return self.done or (not self.finishing and all(c.parked() for c in tuple(self.children)))

    def _next(self) -> tuple[int, Example, VariantSpec] | None:
        if not self._queue:
            try:
                index, example, specs = self.pending.get_nowait()
            except queue.Empty:
                return None
            self._queue = [(index, example, spec) for spec in specs]
        return self._queue.pop(0)

    def _start(self, item: tuple[int, Example, VariantSpec], gate: Gate | None) -> _Started:
        check = getattr(self.sink, "check", None)  # a BackgroundSink that failed stops the suite
        if check is not None:
            check()
        self.host.checkpoint(self)
        spec = item[2]
        started = _Started(
            item, self.root / spec.chapter / spec.example / spec.variant, gate, self,
            suite_layer=self.suite_layer, cli_layer=self.cli_layer, cold_start=self.cold_start, env=dict(self.env),
        )  # fmt: skip
        self.children.append(started)
        return started

    def _open(self, gate: Gate) -> None:
        self.host.checkpoint(self)
        gate.open()

    def run(self, overlap: bool) -> None:
        current: _Started | None = None
        ahead: _Started | None = None
        try:
            item = self._next()
            current = self._start(item, None) if item is not None else None
            while current is not None:
                current.wait_measured()
                item = self._next()
                if overlap and item is not None:
                    ahead = self._start(item, Gate())
                result = current.result()  # its child has exited
                self.children.remove(current)
                beside = ahead is not None and _compare_beside(result)
                if beside:
                    assert ahead is not None and ahead.gate is not None
                    self._open(ahead.gate)
                self.host.checkpoint(self)
                self.finishing = True
                try:
                    self._finish(current, result, beside)
                finally:
                    self.finishing = False
                if ahead is not None:
                    assert ahead.gate is not None
                    if not ahead.gate.is_open():
                        self._open(ahead.gate)
                    current, ahead = ahead, None
                else:
                    current = self._start(item, None) if item is not None else None
        except BaseException:
            for started in (ahead, current):
                if started is not None:
                    started.cancel()
            raise
        finally:
            self.done = True

    def _log(self, result: VariantResult, comparison: Comparison | None) -> None:
        if self.sink is not None:
            self.sink.log_variant(result, comparison)
        if self.on_result is not None:
            self.on_result(result, comparison)

    def _finish(self, started: _Started, result: VariantResult, beside: bool = False) -> None:
        """After the variant's child has exited: profile it, compare it with its baseline, log it.
        ``beside``: the next variant's gate is already open (``_compare_beside``)."""
        index, example, spec = started.item
        wd = self.root / spec.chapter / spec.example / spec.variant
        ran = time.monotonic()
        if result.status == "ok" and result.config.get("enable_profiling"):
            # After the timed child has exited, in children of their own: no profiler overhead in the
            # samples, and the same GPU (the worker's) as the timed run.
            from bench.profiling import profile_variant

            result.profile = profile_variant(
                spec, wd, self.suite_layer, self.cli_layer, timed=result, cold_start=self.cold_start,
                env=dict(self.env),
            ).profile  # fmt: skip
        compare_s = 0.0
        with self.pairs.lock:
            variants, comparisons = self.pairs.done.setdefault(index, ([], []))
            variants.append(result)
            if spec.is_baseline:
                self.pairs.baseline[index] = result
                self._log(result, None)  # before any partner: theirs name its run
                ready = self.pairs.waiting.pop(index, [])
                self.pairs.compared[index] = self.pairs.compared.get(index, 0) + 1
            elif index in self.pairs.baseline:
                ready = [result]
            else:  # a split example: its baseline still runs on another worker, which compares this then
                self.pairs.waiting.setdefault(index, []).append(result)
                ready = []
            baseline = self.pairs.baseline.get(index)
        for optimized in ready:
            assert baseline is not None
            c0 = time.monotonic()
            comparison = compare(baseline, optimized, in_server=not self.cold_start)
            compare_s += time.monotonic() - c0
            with self.pairs.lock:
                comparisons.append(comparison)
                self._log(optimized, comparison)
                self.pairs.compared[index] = self.pairs.compared.get(index, 0) + 1
        with self.pairs.lock:
            complete = self.pairs.compared.get(index, 0) == len(example.variants)
        if complete:
            self.pairs.baseline.pop(index, None)
            if not self.keep_workdir:  # compared: a long suite must not keep every output on disk (1 GiB each)
                for s in example.variants:
                    shutil.rmtree(self.root / s.chapter / s.example / s.variant / "outputs", ignore_errors=True)
        end = time.monotonic()
        # A variant started ahead begins, for the timeline, when its gate opened: before that it ran beside
        # the previous variant (ahead_s), which the previous variant's entry already covers.
        opened = started.gate.opened_at if started.gate is not None else None
        begin = opened if opened is not None and result.ahead_s is not None else started.started
        self.record({
            "key": spec.key, "start_s": begin - self.t0, "run_s": ran - begin, "ahead_s": begin - started.started,
            "compare_s": compare_s, "other_s": end - ran - compare_s, "end_s": end - self.t0,
            "late_s": result.gate_late_s or 0.0,
            "beside": beside,  # compare_s and other_s ran beside the next variant, not before it
            "alone_wait_s": started.alone_wait_s,  # a host-bound measurement waited this long to run alone
        })  # fmt: skip


def _compare_beside(result: VariantResult) -> bool:
    """Whether the next variant on the worker may start its set-up and measurement while this one's
    outputs are compared and its result logged, rather than after: for a GPU variant whose child has
    exited. The comparison runs on the CPU (a server child, bench.compare) and the log in the parent,
    neither on the GPU; on two GPUs one worker's comparison already runs beside the other's measurement,
    with nothing to show for it (call Z1's neighbour probe: not even CUDA starting on the other GPU moved
    a sample). A CPU variant's measurement would share the CPU with it: compared first. A variant that is
    profiled (``enable_profiling``, which a benchmark's own ``get_config()`` may set) runs its profile
    children on this GPU before its comparison: the next variant waits for them."""
    return (result.device or "").startswith("cuda") and not result.config.get("enable_profiling")


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
