"""Parent side of isolation: one child process (own process group) per variant, per-stage deadlines.

The child announces each stage; the watchdog here enforces the limit of the stage in progress. On
expiry the whole process group gets SIGTERM, then SIGKILL after a grace period — a child stuck in a GPU
kernel or a C call cannot ignore that, and grandchildren (DataLoader workers, compile workers) die with
it. Crashes (segfault, ``os._exit``, OOM kill, exceptions) become a structured ``VariantResult``
(``bench.isolate.outcome``).

A worker may hold the child at two points (``bench.isolate.workers`` says when): at its ``Gate``, before the
benchmark's ``setup()`` (a child started ahead), and after its set-up, before its warm-up (``before_measure``:
a host-clocked measurement waits to run alone). A wait at either counts against no stage's limit.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.define.config import BenchmarkConfig, Layer, explicit_fields, resolve_config
from bench.define.context import FILES
from bench.define.result import VariantResult, VariantSpec
from bench.isolate import child as _child
from bench.isolate.holds import Cancelled, Gate
from bench.isolate.kept import Kept
from bench.isolate.outcome import Watch, build_result
from bench.isolate.process import (
    KILL_GRACE_S,
    child_env,
    confirm_cuda,
    cuda_available,
    cuda_guess,
    kill_group,
    remember_mode,
)

__all__ = ["KILL_GRACE_S", "Cancelled", "Gate", "kill_group", "run_variant"]

_EXIT_POLL_S = 0.2  # how often the parent checks whether a silent child has exited
_GATE_POLL_S = 0.01  # how often a child held at its gate is checked for the gate's opening


def handed_files(wd: Path) -> str | None:
    """The directory of the files a variant's child wrote through ``context().file`` (``<wd>/files``), when it
    holds any."""
    d = wd / FILES
    return str(d) if d.is_dir() and any(p.is_file() for p in d.iterdir()) else None


class _ServerFailed(Exception):
    """The pre-warmed server could not fork the child (it is run cold instead)."""


def run_variant(
    spec: VariantSpec,
    workdir: str | Path,
    suite_layer: Layer = None,
    cli_layer: Layer = None,
    python: str = sys.executable,
    mode: str = "run",
    cold_start: bool = False,
    env: dict[str, str] | None = None,
    profile_tool: str | None = None,
    wrapper: Sequence[str] | None = None,
    gate: Gate | None = None,
    on_measured: Callable[[], None] | None = None,
    cancel: threading.Event | None = None,
    before_measure: Callable[[BenchmarkConfig, str | None], None] | None = None,
    measure_gate: str = "all",
    job_extra: dict[str, Any] | None = None,
    on_kept: Callable[[Kept], None] | None = None,
) -> VariantResult:
    """Run one variant in a fresh child process and return its result; never raises for the child's faults.

    The child is forked from a pre-warmed server (heavy imports done once, CUDA never initialised
    there), or, with ``cold_start``, is a brand-new interpreter. Either way it is a new process in its
    own process group, and ``env`` (e.g. CUDA_VISIBLE_DEVICES) is its environment on top of ours.
    ``mode``: "run" (timed), "verify" (setup only) or "profile" (``profile_tool``'s profiled calls,
    bench.isolate.profiled). ``wrapper``: a command prefix (ncu, nsys) for a cold-started child; messages
    then travel through a FIFO, as a profiler need not pass descriptors through to the process it launches.
    ``gate``: start the child ahead and hold it before the benchmark's ``setup()`` until the gate opens
    (``Gate``; mode "run" without a wrapper only); if it ends before reaching the gate (a CUDA context
    that did not fit beside the previous variant's memory, say), it runs again plainly once the gate is
    open. ``on_measured``: called (on this thread) as soon as the child's timed stages (measurement, batch,
    recheck) have ended. ``cancel``: when set (by another thread: an interrupted suite), the child's group
    is killed and ``Cancelled`` raised. ``before_measure``: the child stops after its set-up, before its
    warm-up, and this is called with its effective config and device; it may wait (a host-clocked
    measurement waiting to be alone on the host: bench.isolate.workers), and the wait counts against no
    limit; then the child goes on (mode "run", without a wrapper). ``measure_gate``: "all" (every child
    stops there) or "host_bound" (only one timed on the host's clock: ``bench.define.config.host_clocked``,
    decided by the child from its effective config). ``job_extra``: more for the child's job (a later round's
    ``timing_only``, its ``threads`` cap, its ``keep``: bench.isolate.rounds). ``on_kept``: called with the child's
    ``Kept`` handle when, asked to ``keep``, it parked after its round instead of ending (bench.isolate.kept).
    """
    if gate is not None and (mode != "run" or wrapper):
        gate.wait(cancel)  # only timed runs are held at a gate; the others start once it is open
        gate = None
    return _Child(spec, Path(workdir), suite_layer, cli_layer, python, mode, cold_start, env, profile_tool,
                  wrapper, gate, on_measured, cancel, before_measure, measure_gate, job_extra or {},
                  on_kept).run()  # fmt: skip


@dataclass
class _Child:
    """One child of ``run_variant``: launched, watched until it exits, made into a result."""

    spec: VariantSpec
    wd: Path
    suite_layer: Layer
    cli_layer: Layer
    python: str
    mode: str
    cold_start: bool
    env: dict[str, str] | None
    profile_tool: str | None
    wrapper: Sequence[str] | None
    gate: Gate | None
    on_measured: Callable[[], None] | None
    cancel: threading.Event | None
    before_measure: Callable[[BenchmarkConfig, str | None], None] | None
    measure_gate: str
    job_extra: dict[str, Any]
    on_kept: Callable[[Kept], None] | None = None
    job: dict[str, Any] = field(default_factory=dict)
    ahead_s: float | None = None  # spawn until the gate opened, for a child held at one
    gate_late_s: float | None = None  # the gate opened before the child got there: the worker waited for it
    let_through: bool = False  # the child was sent its "go" at its gate
    measured: bool = False  # on_measured was called

    def run(self) -> VariantResult:
        pre = resolve_config(self.suite_layer, self.cli_layer)
        self.wd.mkdir(parents=True, exist_ok=True)
        self.job = self._job(pre)
        read_fd, write_fd, channel_arg = self._channel()
        environment = child_env(pre, {**os.environ, **(self.env or {})}, self.wd / "compile-cache")
        t0 = time.monotonic()
        try:
            proc = self._spawn(environment, write_fd, channel_arg)
        except _ServerFailed as exc:  # nothing is lost: the variant runs cold instead
            os.close(read_fd)
            result = self.again(cold=True)
            result.launch = f"cold_start (fallback: the server failed: {exc})"
            return result
        if self.job.get("keep"):
            Kept.listed(self.wd, proc.pid)
        watch = Watch(self.spec, pre, self.mode)
        timed_out = self._watch(proc, read_fd, watch, t0)
        again = self._again_instead(proc, watch, timed_out)
        if again is not None:
            return again
        code = 0 if watch.kept is not None else proc.returncode
        result = build_result(watch, code, timed_out, time.monotonic() - t0, self.wd / "child.log")
        result.cuda_visible_devices = environment.get("CUDA_VISIBLE_DEVICES")
        result.ahead_s = self.ahead_s
        result.gate_late_s = self.gate_late_s
        result.launch = "cold_start" if self.cold_start or self.wrapper else "server"
        result.files = handed_files(self.wd)
        if watch.kept is not None and self.on_kept is not None:
            self.on_kept(Kept(self, proc, read_fd, watch.config, watch.kept, watch.data.get("device")))
        return result

    def again(self, cold: bool) -> VariantResult:
        """This variant once more (cold, or plainly after a start ahead that ended early), once its gate
        is open; the caller says why in ``launch``."""
        if self.gate is not None:
            self.gate.wait(self.cancel)
        return run_variant(
            self.spec, self.wd, self.suite_layer, self.cli_layer, self.python, self.mode, cold, self.env,
            self.profile_tool, self.wrapper, cancel=self.cancel, before_measure=self.before_measure,
            measure_gate=self.measure_gate, job_extra=self.job_extra, on_kept=self.on_kept,
        )  # fmt: skip

    def _job(self, pre: BenchmarkConfig) -> dict[str, Any]:
        """What the child is told (``job.json``): its file, layers, mode, the holds it stops at."""
        stops = self.before_measure is not None and self.mode == "run" and not self.wrapper
        job: dict[str, Any] = {
            "path": self.spec.path,
            "reference": self.spec.reference,  # a KernelBench candidate's problem (bench.define.kernelbench)
            "workdir": str(self.wd),
            "suite_layer": explicit_fields(self.suite_layer),
            "cli_layer": explicit_fields(self.cli_layer),
            "mode": self.mode,  # "run", "verify" (startup + setup + teardown) or "profile"
            "profile_tool": self.profile_tool,
            "gate": self.gate is not None,
            "measure_gate": self.measure_gate if stops else False,
            **self.job_extra,
        }
        if not (self.on_kept is not None and self.mode == "run" and not self.wrapper):
            job.pop("keep", None)  # parked children are timed ones, whose parent takes them back
        guess, exact = cuda_guess()
        if pre.device == "auto" and not exact:
            job["cuda_expected"] = guess  # the child verifies the guess its environment was built on
        (self.wd / "job.json").write_text(json.dumps(job))
        return job

    def _channel(self) -> tuple[int, int, str]:
        """The child's message channel: (our end, its end or -1, what it is told to open)."""
        if self.wrapper:
            fifo = self.wd / "messages.fifo"
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo)
            # Opened read-write: no EOF before the child opens its end, so its exit is noticed by polling.
            return os.open(fifo, os.O_RDWR | os.O_NONBLOCK), -1, str(fifo)
        if self.gate is not None or self.job["measure_gate"] or self.job.get("keep"):  # messages up, orders down
            parent_end, child_end = socket.socketpair()
            read_fd, write_fd = parent_end.detach(), child_end.detach()
            return read_fd, write_fd, str(write_fd)
        read_fd, write_fd = os.pipe()
        return read_fd, write_fd, str(write_fd)

    def _spawn(self, environment: dict[str, str], write_fd: int, channel_arg: str) -> Any:
        """The child: a fresh interpreter (cold start, or under a profiler), else a fork of the server. Closes
        our copy of the child's end of the channel."""
        log_path, job_path = self.wd / "child.log", str(self.wd / "job.json")
        if self.cold_start or self.wrapper:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [*(self.wrapper or []), self.python, "-m", "bench.isolate.child", job_path, channel_arg],
                    pass_fds=(write_fd,) if write_fd >= 0 else (),
                    start_new_session=True,  # own session ⇒ own process group, killable as a whole
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=str(self.wd),
                )  # fmt: skip
            if write_fd >= 0:
                os.close(write_fd)
            return proc
        from bench.isolate import server

        interpret = environment.get("TRITON_INTERPRET") == "1"
        try:
            proc = server.spawn("bench.isolate.child:entry", [job_path], write_fd, environment, str(self.wd),
                                str(log_path), interpret)  # fmt: skip
        except (OSError, server.ServerError) as exc:
            raise _ServerFailed(str(exc)) from exc
        finally:
            os.close(write_fd)
        remember_mode(interpret)
        return proc

    def _watch(self, proc: Any, read_fd: int, watch: Watch, t0: float) -> bool:
        """Read the child's messages until it exits, enforcing the limit of the stage in progress; True when a
        stage ran out of time. The child's whole group is killed when it is done (or on any exception here)."""
        timed_out = interrupted = False
        buf = b""
        try:
            while True:
                if self.cancel is not None and self.cancel.is_set():
                    raise Cancelled(f"{self.spec.key}: cancelled")
                self._let_through(watch, read_fd, t0)
                if watch.gated_since is not None:
                    remaining, poll = math.inf, _GATE_POLL_S
                else:
                    remaining = watch.stage_t0 + watch.limit() - time.monotonic()
                    poll = min(remaining, _EXIT_POLL_S)
                if remaining <= 0:
                    timed_out = True
                    break
                chunk = self._read(proc, read_fd, poll)
                if chunk is None:
                    continue
                if not chunk:
                    break  # child closed the pipe (exited or crashed), or exited with nothing more to read
                *lines, buf = (buf + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        watch.handle(json.loads(line))
                self._hold(watch, read_fd)
                if watch.kept is not None:
                    return False  # parked: its channel and process stay, for its next round (Kept)
        except BaseException:  # Ctrl-C, or a fault of the harness: the child must not run on unwatched
            interrupted = True
            raise
        finally:
            if watch.kept is None or interrupted:
                os.close(read_fd)
                timed_out = self._reap(proc, watch, timed_out or interrupted) or timed_out
        return timed_out

    @staticmethod
    def _read(proc: Any, read_fd: int, poll: float) -> bytes | None:
        """What the child wrote next; ``b""`` once it is gone; None when nothing came within ``poll``."""
        ready, _, _ = select.select([read_fd], [], [], poll)
        if not ready:
            # A grandchild forked by the benchmark (DataLoader-style worker) inherits the pipe, so
            # EOF may never come: stop once the child has exited and the pipe holds nothing more.
            if proc.poll() is not None and not select.select([read_fd], [], [], 0)[0]:
                return b""
            return None  # the caller re-checks the (possibly updated) deadline
        try:
            return os.read(read_fd, 1 << 16)
        except BlockingIOError:
            return None

    def _let_through(self, watch: Watch, read_fd: int, t0: float) -> None:
        """A child waiting at a gate that has opened gets its "go"; the wait counts against no limit."""
        gate = self.gate
        if watch.gated_since is None or gate is None or not gate.is_open():
            return
        now = time.monotonic()
        watch.stage_t0 += now - watch.gated_since
        self.ahead_s = max(0.0, (gate.opened_at or now) - t0)  # the part run beside the previous variant
        # The gate opened before the child got there: the worker waited for its start-up/CUDA context.
        self.gate_late_s = max(0.0, watch.gated_since - (gate.opened_at or now))
        watch.gated_since = None
        self.let_through = True
        with contextlib.suppress(OSError):  # a child that died meanwhile: its EOF ends the loop
            os.write(read_fd, b"g")

    def _hold(self, watch: Watch, read_fd: int) -> None:
        """After new messages: tell the gate the child reached it; ask ``before_measure`` whether a set-up child
        may measure now (its wait counts against no limit); report the end of the timed stages."""
        if self.gate is not None and watch.gated_since is not None:
            self.gate.arrived.set()
        if watch.ready_since is not None and self.before_measure is not None:
            self.before_measure(watch.config, watch.data.get("device", {}).get("device"))
            watch.stage_t0 += time.monotonic() - watch.ready_since
            watch.ready_since = None
            with contextlib.suppress(OSError):  # a child that died meanwhile: its EOF ends the loop
                os.write(read_fd, b"m")
        if self.on_measured is not None and not self.measured and watch.timed_done():
            self.measured = True
            self.on_measured()

    @staticmethod
    def _reap(proc: Any, watch: Watch, kill: bool) -> bool:
        """Kill the child's group (at once when ``kill``, else once the child has exited, within the stage's
        limit); True when the child did not exit in time."""
        if kill:
            kill_group(proc)
            return False
        try:
            proc.wait(timeout=watch.limit())
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return True
        kill_group(proc)  # reap any grandchild left in the group
        return False

    def _again_instead(self, proc: Any, watch: Watch, timed_out: bool) -> VariantResult | None:
        """The result of running the variant again, when this child's own result would not be the variant's:
        it ended before its gate, or it was forked in the wrong Triton mode; None otherwise."""
        if self.gate is not None and not self.let_through and not timed_out:
            # It ended before its gate opened (or never reached it): run it plainly once the gate is open,
            # so a failure of the start ahead (a CUDA context that found no room beside the previous
            # variant's memory, a benchmark object that allocated too much) is never the variant's record.
            result = self.again(cold=self.cold_start)
            result.launch = f"{result.launch} (again, without starting ahead: the first child ended before its gate)"
            return result
        guessed = "cuda_expected" in self.job
        mismatch = proc.returncode == _child.TRITON_MODE_MISMATCH and not watch.records and not watch.data
        if mismatch and guessed:
            cuda_available()  # the guess was wrong: ask torch; the cold re-run's environment is then exact
        if mismatch and (not (self.cold_start or self.wrapper) or guessed):
            result = self.again(cold=True)
            result.launch = (
                f"cold_start (fallback: CUDA was guessed {'' if self.job['cuda_expected'] else 'un'}available, "
                "torch says otherwise)"
                if guessed
                else "cold_start (fallback: the server imported Triton in the other interpreter mode)"
            )
            return result
        if guessed and (watch.records or watch.data):
            confirm_cuda(bool(self.job["cuda_expected"]))
        return None
