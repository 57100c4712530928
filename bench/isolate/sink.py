"""Where a suite's finished results go: a ``Sink`` (the MLflow tracker, a test's list), and the
``BackgroundSink`` that opens and feeds one on a thread of its own, so that the suite waits neither for it
nor on it. With ``keep`` (``bench.record.spool``: the results on disk first) a result is kept on the suite's
own thread before it is queued, so that nothing measured depends on the sink's thread or on the store.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

from bench.define.result import Comparison, VariantResult
from bench.errors import PerflabError


class Sink(Protocol):
    """Where finished results go (the MLflow tracker, a test's list)."""

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str: ...


OnResult = Callable[[VariantResult, Comparison | None], None]
_TICK_S = 1.0  # how often an idle sink's ``tick`` runs (a spool retrying its uploads)


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

    ``keep``: called with each result on the caller's thread before it is queued (the write-ahead spool); an
    error there is raised to the caller at once, as nothing may run that cannot be recorded. A sink with a
    ``tick()`` has it called every second while no result arrives (a spool's retries of a store that failed).
    """

    def __init__(self, open_sink: Callable[[], Sink], keep: OnResult | None = None) -> None:
        self._keep = keep
        self._queue: queue.SimpleQueue[tuple[VariantResult, Comparison | None] | _Marker | None] = queue.SimpleQueue()
        self._sink: Sink | None = None
        self._error: BaseException | None = None
        self._lost: list[str] = []  # variants queued but never logged, because the sink failed
        self._t0 = time.monotonic()
        # Set once the sink is open, or failed to open: opening is seconds of CPU-bound Python (MLflow's
        # import, a new store's migrations), which a host-clocked measurement waits out (bench.isolate.workers).
        self.opened = threading.Event()
        self.ready_s: float | None = None  # seconds from creation until the sink was open
        self.wait_s: float | None = None  # seconds ``close`` waited for the queue to drain
        # Seconds spent recording results: opening the sink, keeping each result (on the suite's threads) and
        # logging it (on this one, beside the variants): the suite's "logging" time (bench.record.summary).
        self.busy_s = 0.0
        self._busy_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, args=(open_sink,), name="perflab-sink", daemon=True)
        self._thread.start()

    def _loop(self, open_sink: Callable[[], Sink]) -> None:
        try:
            self._sink = open_sink()
        except BaseException as exc:  # recorded, raised by check/close in the suite's threads
            self._error = exc
        self.ready_s = time.monotonic() - self._t0
        self._add_busy(self.ready_s)
        self.opened.set()
        tick = getattr(self._sink, "tick", None)
        while (item := self._get(tick)) is not None:
            if isinstance(item, _Marker):
                item.done.set()
                continue
            if self._error is not None:
                self._lost.append(item[0].spec.key)
                continue
            t0 = time.monotonic()
            try:
                self._sink.log_variant(*item)  # type: ignore[union-attr]
            except BaseException as exc:
                self._error = exc
                self._lost.append(item[0].spec.key)
            self._add_busy(time.monotonic() - t0)

    def _add_busy(self, seconds: float) -> None:
        with self._busy_lock:
            self.busy_s += seconds

    def _get(self, tick: Callable[[], None] | None) -> tuple[VariantResult, Comparison | None] | _Marker | None:
        while True:
            try:
                return self._queue.get(timeout=_TICK_S) if tick is not None else self._queue.get()
            except queue.Empty:
                if self._error is None:
                    try:
                        tick()  # type: ignore[misc]
                    except BaseException as exc:
                        self._error = exc

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str:
        """Keep (``keep``) and queue one result; returns at once (the run id is not known yet: "")."""
        if self._keep is not None:
            t0 = time.monotonic()
            self._keep(result, comparison)
            self._add_busy(time.monotonic() - t0)
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
        (a profile's trace) must still exist when it is logged. Kept results (``keep``) hold their files."""
        if self._keep is not None:
            return
        done = threading.Event()
        self._queue.put(_Marker(done))
        while self._thread.is_alive() and not done.wait(0.1):
            pass

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
