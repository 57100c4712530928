"""Where a worker holds its children (bench.isolate.workers): a child started ahead at its ``Gate`` (rule 1: one
variant's process per GPU past set-up), and the ``Host``'s turn (rule 3: a host-clocked measurement runs alone on
the host; the other workers wait at their next step: start a child, open a gate, compare, measure)."""

from __future__ import annotations

import threading
import time
from typing import Any

_EXIT_POLL_S = 0.2  # how often a wait at a gate checks for a cancelled suite


class Cancelled(Exception):
    """``run_variant``'s ``cancel`` was set: its child was killed (an interrupted suite)."""


class Gate:
    """Holds a variant started ahead at its gate until the previous variant on the same GPU is over.

    A child started ahead (``run_variant(gate=...)``) runs its start-up and the first part of set-up
    (benchmark object, config, CUDA context, NVML) while the previous variant's child checks its outputs,
    tears down and exits and its outputs are compared; then it stops, before the benchmark's
    ``setup()``, until ``open()``. Nothing of the previous variant's measurement overlaps it (the next
    one starts only after that measurement ended), and nothing of it overlaps the next one's: the gate
    opens after the previous child has exited. The wait counts against no stage's limit."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self.opened_at: float | None = None  # time.monotonic() of open()
        self.arrived = threading.Event()  # the child has reached the gate (its CUDA context made)

    def open(self) -> None:
        self.opened_at = time.monotonic()
        self._open.set()

    def is_open(self) -> bool:
        return self._open.is_set()

    def wait(self, cancel: threading.Event | None) -> None:
        """Until opened; raises Cancelled when ``cancel`` is set first."""
        while not self._open.wait(_EXIT_POLL_S):
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled at its gate")


class Host:
    """Rule 3: a host-clocked measurement runs alone on the host; the other workers wait at their next step."""

    def __init__(self, sink: Any = None) -> None:
        self.cond = threading.Condition()
        self.owner: Any = None  # the worker (a bench.isolate.workers.Lane) whose measurement runs alone, or waits to
        self.lanes: list[Any] = []
        self.opened = getattr(sink, "opened", None)  # a BackgroundSink's: set once MLflow's start is over
        self.stopping = threading.Event()  # the suite was interrupted: start nothing more

    def stop(self) -> None:
        """An interrupted suite (Ctrl-C, SIGTERM on the main thread): every worker's children are killed, and no
        worker starts another; each worker's thread ends once it has reaped them."""
        self.stopping.set()
        for lane in self.lanes:
            for child in tuple(lane.children):
                child.cancelled.set()

    def checkpoint(self, lane: Any, cancel: threading.Event | None = None) -> None:
        """Before ``lane`` starts a child, opens a gate, compares or measures: wait while another runs alone."""
        with self.cond:
            while self.owner is not None and self.owner is not lane:
                if cancel is not None and cancel.is_set():
                    raise Cancelled("cancelled while another worker measured alone")
                self.cond.wait(0.05)

    def alone(self, lane: Any, cancel: threading.Event) -> None:
        """Until ``lane``'s host-clocked measurement may start: MLflow's start over, then nothing else running."""
        while self.opened is not None and not self.opened.wait(0.05):  # the others run on meanwhile
            if cancel.is_set():
                raise Cancelled("cancelled while waiting to measure alone")
        with self.cond:
            while self.owner is not None and self.owner is not lane:
                if cancel.is_set():
                    raise Cancelled("cancelled while waiting to measure alone")
                self.cond.wait(0.05)
            self.owner = lane
            while lane.finishing or not all(other.quiet() for other in self.lanes if other is not lane):
                if cancel.is_set():
                    self.owner = None
                    self.cond.notify_all()
                    raise Cancelled("cancelled while waiting to measure alone")
                self.cond.wait(0.01)  # polled: children end and reach gates without telling

    def release(self, lane: Any) -> None:
        with self.cond:
            if self.owner is lane:
                self.owner = None
                self.cond.notify_all()
