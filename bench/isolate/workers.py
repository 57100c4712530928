"""Several variants at a time: workers, children started ahead, gates, and what may run beside what.

A worker (one per GPU under ``--gpus``, pinned with CUDA_VISIBLE_DEVICES; ``--jobs N`` on a CPU; one by
default) takes whole examples from the suite's queue and runs their variants one after another, baseline
first, each in a child of its own (``bench.isolate.runner``). These are the rules, and where each is enforced:

1. **One variant's process per GPU past set-up.** A worker starts the next variant's child ahead (``overlap``,
   the default on the fast path) once the previous variant's timed stages are over (measurement, batch,
   recheck: the runner's ``on_measured``). That child runs its start-up, builds its benchmark object and
   config, creates its CUDA context and opens NVML, then waits at its ``Gate`` before the benchmark's
   ``setup()``. The gate opens once the previous child has exited: no measurement shares its GPU with
   another variant's process (their NVML snapshots would flag it; H200 × 2: 0 "shared" flags in 144 variants).
   A wait at the gate counts against no stage limit; a child that ends before its gate (a context that found
   no room beside the previous variant's memory) runs again plainly once the gate is open.
2. **No CUDA start during a measurement on its GPU.** The next child starts only after the previous one's
   timed stages, because even ``cuInit`` alone on the measured GPU lengthens the tail of its samples, and a
   context moved a matmul's (docs/results/h200x2.md, docs/results/h100.md: the neighbour probe). Children
   starting, working and exiting on *another* GPU moved no sample, so GPU-clocked measurements of different
   workers run side by side (chapter 7 on two GPUs: all 16 medians within ±0.2 % of one GPU's).
3. **A host-clocked measurement runs alone on the host** (``bench.define.config.host_clocked``: every variant
   on a CPU device, and the ``cpu`` and ``pytorch`` clocks on a GPU: their samples include the host's CPU
   work). It waits, after its set-up and before its warm-up (the runner's ``before_measure``), until MLflow's
   start is over (its import and store take seconds of CPU-bound Python in this process: on the 2-core CI
   machine a 2-thread op read 16 ms instead of 0.03 ms beside it) and everything else is quiet: every other
   worker's children parked (gone, at a closed gate with their CUDA context made, or set up and waiting
   before their warm-up), no comparison running, its own worker's included; meanwhile no worker starts a
   child, opens a gate, compares or measures (bench.isolate.holds' ``Host.checkpoint``). Set-up is not
   measured: it runs beside the others. Measured need: on the H200 × 2 chapter 1's training_step baseline
   (pageable copies) read 64.0 ms on two GPUs against 20.5 ms on one until this rule; with it the medians match.
4. **Where each child stops to let the rules hold.** With several workers every child stops after its set-up
   (so that any of them can be parked while a host-clocked one measures); with one worker only a
   host-clocked child does (it waits for MLflow's start and for its worker's comparison of the previous
   variant). The child decides from its effective config (the runner's ``measure_gate``).
5. **Comparisons.** Once a GPU variant's child has exited, the next variant's gate opens and the pair's
   outputs are compared (on the CPU, in a child of the server) and logged beside it: neither touches the GPU.
   A CPU variant is compared before the next variant goes on: the comparison would share the CPU with its
   measurement. So is a profiled GPU variant (``enable_profiling``): its profile children run on the GPU
   before its comparison.
6. **Parked children.** A pair's children kept across its rounds (``round_children``: bench.isolate.kept) park
   after each round, holding a CUDA context and memory and running nothing; "exited" in rules 1 and 5 reads
   "exited or parked" for them. They end at a round's end, while nothing measures.

A whole example runs on one worker, so a baseline and its optimized partners share a GPU: a speedup is never
taken across two GPUs. The order of examples (``bench.isolate.suite``: longest first by the last run's times)
changes which worker idles at the end, never what a variant measures.
"""

from __future__ import annotations

import queue
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from bench.define.config import Layer, host_clocked, resolve_config
from bench.define.discovery import Example
from bench.define.result import Comparison, VariantResult, VariantSpec
from bench.isolate.channel import PARKED_FILE
from bench.isolate.holds import Host
from bench.isolate.process import KILL_GRACE_S, verify_in_server
from bench.isolate.rounds import Rounds
from bench.isolate.runner import Gate, run_variant
from bench.isolate.sink import OnResult, Sink

Worker = Mapping[str, str]  # environment of one worker, e.g. {"CUDA_VISIBLE_DEVICES": "1"}
Item = tuple[int, Example, VariantSpec, Rounds]  # (the example's index in the suite, the example, a variant, rounds)


class Pending(Protocol):
    """Where a host's workers take examples from: ``get_nowait`` gives (index in the suite, example), or raises
    ``queue.Empty`` when there is none (a ``queue.SimpleQueue``; a Ray node's, bench.isolate.cluster)."""

    def get_nowait(self) -> tuple[int, Example]: ...


class Done:
    """Each example's results and comparisons, by its index in the suite, as the workers finish them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_example: dict[int, tuple[list[VariantResult], list[Comparison]]] = {}

    def add(self, index: int, result: VariantResult | None = None, comparison: Comparison | None = None) -> None:
        with self.lock:
            variants, comparisons = self.by_example.setdefault(index, ([], []))
            if result is not None:
                variants.append(result)
            if comparison is not None:
                comparisons.append(comparison)


class _Started:
    """One variant's ``run_variant`` on a thread of its own. ``measured`` is set once the child's timed stages
    have ended (or the run is over): the moment the next variant may start ahead (rule 2)."""

    def __init__(self, item: Item, wd: Path, gate: Gate | None, lane: Lane, **kwargs: Any) -> None:
        self.item = item
        self.gate = gate
        self.lane = lane  # its worker
        self.round = item[3].number  # its example's round
        self.measured = threading.Event()
        self.cancelled = threading.Event()
        self.admitting = False  # set up, stopped before its warm-up (runner's before_measure): waiting to measure
        self.alone_wait_s: float | None = None
        self.started = time.monotonic()
        self._result: VariantResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._go, args=(item[2], wd, kwargs), name=f"perflab-{item[2].key}", daemon=True
        )
        self._thread.start()

    def _go(self, spec: VariantSpec, wd: Path, kwargs: dict[str, Any]) -> None:
        rounds = self.item[3]
        try:
            kept = rounds.resume(spec)
            if kept is not None:  # its child of round 0, parked (bench.isolate.kept)
                self._result = kept.again(rounds.order(), self.gate, self.cancelled, self._measured, self._admit)
                return
            self._result = run_variant(
                spec, wd, gate=self.gate, on_measured=self._measured, cancel=self.cancelled,
                before_measure=self._admit,
                measure_gate="all" if len(self.lane.host.lanes) > 1 else "host_bound",  # rule 4
                on_kept=lambda kept: rounds.kept.__setitem__(spec.key, kept), **kwargs,
            )  # fmt: skip
        except BaseException as exc:  # raised again by result(), on the worker's thread
            self._error = exc
        finally:
            self._measured()

    def _measured(self) -> None:
        self.lane.host.release(self.lane)  # a host-clocked measurement is over: the others go on
        self.measured.set()

    def _admit(self, config: Any, device: str | None = None) -> None:
        """Set up, before its warm-up (runner's ``before_measure``): a host-clocked measurement waits to be
        alone on the host; any other waits while one is."""
        t0 = time.monotonic()
        self.admitting = True
        try:
            if host_clocked(config, device) or config.world_size > 1 or config.gpus > 1:  # it takes every GPU
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


class Lane:
    """One worker: takes examples from the shared queue and runs their variants one after another, each
    started ahead (``overlap``) while the previous one finishes; compares, logs and records them."""

    def __init__(
        self, pending: Pending, done: Done, root: Path, suite_layer: Layer,
        cli_layer: Layer, sink: Sink | None, on_result: OnResult | None, cold_start: bool, env: Worker,
        record: Callable[[dict[str, Any]], None], t0: float, keep_workdir: bool, host: Host,
    ) -> None:  # fmt: skip
        self.pending, self.done, self.root, self.sink, self.on_result = pending, done, root, sink, on_result
        self.suite_layer, self.cli_layer, self.cold_start, self.env = suite_layer, cli_layer, cold_start, env
        self.record, self.t0, self.keep_workdir = record, t0, keep_workdir
        self._queue: list[Item] = []  # the rest of the current example's round
        self._rounds: Rounds | None = None  # the current example's rounds (bench.isolate.rounds)
        self.host = host  # what the workers share
        self.children: list[_Started] = []  # its children not yet finished (current, ahead)
        self.finishing = False  # comparing and logging a finished variant
        self.over = False

    def quiet(self) -> bool:
        """Nothing of this worker's runs on the host (rule 3): its children parked, no comparison."""
        return self.over or (not self.finishing and all(c.parked() for c in tuple(self.children)))

    def _next(self) -> Item | None:
        """The next child to start: the rest of this round, the example's next round, or the next example's first;
        None at a round's end (its last result decides whether another round runs) or when nothing is left."""
        if self.host.stopping.is_set():
            return None
        if not self._queue:
            r = self._rounds
            if r is not None and r.waiting and not r.final():
                return None
            if r is None or r.done or r.final():
                try:
                    index, example = self.pending.get_nowait()
                except queue.Empty:
                    return None
                r = self._rounds = Rounds(example, resolve_config(self.suite_layer, self.cli_layer), index=index)
                if example.variants:  # pids of an earlier run's parked children are not this one's
                    v = example.variants[0]
                    (self.root / v.chapter / v.example / PARKED_FILE).unlink(missing_ok=True)
            self._queue = [(r.index, r.example, s, r) for s in r.start(fresh=not self.children)]
        return self._queue.pop(0)

    def _start(self, item: Item, gate: Gate | None) -> _Started:
        check = getattr(self.sink, "check", None)  # a BackgroundSink that failed stops the suite
        if check is not None:
            check()
        self.host.checkpoint(self)
        spec = item[2]
        started = _Started(
            item, self.root / spec.chapter / spec.example / spec.variant, gate, self, suite_layer=self.suite_layer,
            cli_layer=item[3].layer(self.cli_layer), cold_start=self.cold_start, env=self._env(),
            job_extra=item[3].job(spec),
        )  # fmt: skip
        self.children.append(started)
        return started

    def _env(self) -> dict[str, str]:
        """This worker's environment, and the GPUs of every worker: a variant of several ranks (world_size > 1)
        runs alone on the host (rule 3) and its ranks use them all (bench.isolate.ranks)."""
        pins = [lane.env.get("CUDA_VISIBLE_DEVICES") for lane in self.host.lanes]
        if len(pins) < 2 or not all(pins):
            return dict(self.env)
        return {**self.env, "PERFLAB_RANK_DEVICES": ",".join(p for p in pins if p)}

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
                item = self._next()  # None at a round's end
                if overlap and item is not None:
                    ahead = self._start(item, Gate())  # rules 1 and 2
                result = current.result()  # its child has exited
                self.children.remove(current)
                beside = ahead is not None and _compare_beside(result)
                if beside:
                    assert ahead is not None and ahead.gate is not None
                    self._open(ahead.gate)
                self.host.checkpoint(self)
                ran = time.monotonic()
                finished = self._finishing(self._finish, current, result)
                if item is None:  # a round's end, decided now: the example's next round, or the next example
                    item = self._next()
                    if overlap and item is not None and finished is not None and _compare_beside(result):
                        ahead, beside = self._start(item, None), True  # rule 5: comparisons beside the next variant
                compare_s = 0.0
                if finished is not None:
                    self.host.checkpoint(self)
                    compare_s = self._finishing(self._complete, finished)
                self._record(current, result, ran, compare_s, beside)
                if ahead is not None:
                    if ahead.gate is not None and not ahead.gate.is_open():
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
            if self._rounds is not None:
                self._rounds.kill_kept()  # after an example's last round none is left; after a fault, none may stay
            self.over = True

    def _finishing(self, step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)`` as this worker's finishing work (rule 3: not quiet meanwhile)."""
        self.finishing = True
        try:
            return step(*args)
        finally:
            self.finishing = False

    def _log(self, result: VariantResult, comparison: Comparison | None) -> None:
        if self.sink is not None:
            self.sink.log_variant(result, comparison)
        if self.on_result is not None:
            self.on_result(result, comparison)

    def _finish(self, started: _Started, result: VariantResult) -> Rounds | None:
        """After a child has exited: profile it (in its first round), add it to its example's rounds. Returns the
        rounds when this completed the example's last."""
        _, _, spec, rounds = started.item
        if rounds.number == 0 and result.status == "ok" and result.config.get("enable_profiling"):
            # After the timed child has exited, in children of their own: no profiler overhead in the
            # samples, and the same GPU (the worker's) as the timed run.
            from bench.isolate.profiled import profile_variant

            wd = self.root / spec.chapter / spec.example / spec.variant
            result.profile = profile_variant(
                spec, wd, self.suite_layer, self.cli_layer, timed=result, cold_start=self.cold_start,
                env=dict(self.env),
            ).profile  # fmt: skip
        if not rounds.add(spec, result):
            return None
        for kept in rounds.release():  # the round is over: nothing measures while they end
            kept.end()
        return rounds if rounds.done else None

    def _complete(self, rounds: Rounds) -> float:
        """An example's last round is over: each variant's result over its rounds and each pair's comparison kept
        and logged, the baseline first (its partners' runs name its run); its outputs removed. Returns the seconds
        the comparisons took."""
        c0 = time.monotonic()
        comparisons = {c.variant: c for c in rounds.compare(None if self.cold_start else verify_in_server)}
        compare_s = time.monotonic() - c0
        for result in rounds.results():
            comparison = comparisons.get(result.spec.variant)
            self.done.add(rounds.index, result, comparison)
            self._log(result, comparison)
        if not self.keep_workdir:  # compared: a long suite must not keep every output on disk (1 GiB each)
            for s in rounds.example.variants:
                shutil.rmtree(self.root / s.chapter / s.example / s.variant / "outputs", ignore_errors=True)
        return compare_s

    def _record(self, started: _Started, result: VariantResult, ran: float, compare_s: float, beside: bool) -> None:
        """The variant's entry in the suite's time line."""
        end = time.monotonic()
        # A variant started ahead begins, for the timeline, when its gate opened: before that it ran beside
        # the previous variant (ahead_s), which the previous variant's entry already covers.
        opened = started.gate.opened_at if started.gate is not None else None
        begin = opened if opened is not None and result.ahead_s is not None else started.started
        self.record({
            "key": started.item[2].key, "round": started.round, "launch": result.launch, "start_s": begin - self.t0,
            "run_s": ran - begin,
            "ahead_s": begin - started.started, "compare_s": compare_s, "other_s": end - ran - compare_s,
            "end_s": end - self.t0, "late_s": result.gate_late_s or 0.0,
            "beside": beside,  # compare_s and other_s ran beside the next variant, not before it
            "alone_wait_s": started.alone_wait_s,  # a host-clocked measurement waited this long to run alone
        })  # fmt: skip


def _compare_beside(result: VariantResult) -> bool:
    """Rule 5: whether the next variant on the worker may go on while this one's outputs are compared and
    its result logged, rather than after: for a GPU variant whose child has exited (the comparison runs on
    the CPU, in a server child; the log in this process: neither on the GPU). A CPU variant's measurement
    would share the CPU with it: compared first. A variant that is profiled (``enable_profiling``, which a
    benchmark's own ``get_config()`` may set) runs its profile children on this GPU before its comparison:
    the next variant waits for them."""
    return (result.device or "").startswith("cuda") and not result.config.get("enable_profiling")
