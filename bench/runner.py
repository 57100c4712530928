"""Parent side of isolation: one child process (own process group) per variant, per-stage deadlines.

The child announces each stage; the watchdog here enforces the limit of the stage in progress. On
expiry the whole process group gets SIGTERM, then SIGKILL after a grace period — a child stuck in a GPU
kernel or a C call cannot ignore that, and grandchildren (DataLoader workers, compile workers) die with
it. Crashes (segfault, ``os._exit``, OOM kill, exceptions) become a structured ``VariantResult``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from bench import _child
from bench.config import BenchmarkConfig, Layer, explicit_fields, resolve_config
from bench.result import (
    STAGES,
    BatchTiming,
    ErrorInfo,
    Generation,
    Memory,
    OutputInfo,
    Profile,
    Recheck,
    StageRecord,
    Timing,
    VariantResult,
    VariantSpec,
    Work,
)
from bench.stats import summarize

KILL_GRACE_S = 2.0
_EXIT_POLL_S = 0.2  # how often the parent checks whether a silent child has exited
_GATE_POLL_S = 0.01  # how often a child held at its gate is checked for the gate's opening
_LOG_TAIL = 4000


def child_env(config: BenchmarkConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child: the parent's, plus what must be set before torch/triton import."""
    env = dict(os.environ if base is None else base)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    if config.device == "cpu" or (config.device == "auto" and not cuda_guess()[0]):
        env.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run on the CPU through the interpreter
    if config.deterministic:
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # must precede CUDA init
    return env


_CUDA: bool | None = None


def _cuda_available() -> bool:
    global _CUDA
    if _CUDA is None:
        import torch

        _CUDA = bool(torch.cuda.is_available())
    return _CUDA


class _Process(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ForkedProcess:
    """A multiprocessing.Process from a forkserver (the sweeps' trials), with Popen's poll/wait/returncode."""

    def __init__(self, process: Any) -> None:
        self._p = process
        self.pid: int = process.pid

    def poll(self) -> int | None:
        return self._p.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._p.join(timeout)
        if self._p.exitcode is None:
            raise subprocess.TimeoutExpired("variant child", timeout or 0.0)
        return int(self._p.exitcode)

    @property
    def returncode(self) -> int | None:
        return self._p.exitcode


def server_interpret(config: BenchmarkConfig, env: dict[str, str] | None = None) -> bool:
    """The Triton mode of the server ``config``'s variants are forked from (as ``child_env`` decides)."""
    return child_env(config, env).get("TRITON_INTERPRET") == "1"


_MODE: bool | None = None  # the Triton mode of the server this process last used (prestart or a variant)


def in_server(fn: Any, *args: Any, timeout: float) -> Any:
    """``fn(*args)`` in a fresh child of the pre-warmed server (torch imported there, not here)."""
    from bench import server

    interpret = _MODE if _MODE is not None else server_interpret(resolve_config())
    return server.call(fn, *args, interpret=interpret, timeout=timeout)


def _confirm_cuda(answer: bool) -> None:
    """A child checked the guess against torch and went on: the answer is exact from now on, and later
    children skip the check (``torch.cuda.is_available()``: ~0.08 s of each variant's start-up on the
    H200 host, where the parent no longer imports torch to learn it)."""
    global _CUDA
    if _CUDA is None:
        _CUDA = answer


def cuda_guess() -> tuple[bool, bool]:
    """(CUDA available, exactly known): torch's answer once this process has it, else ``cuda_likely()``.

    The parent does not import torch (~4 s on a GPU host), so variants go by the guess: a child told a
    guess checks it against torch before anything else and exits with TRITON_MODE_MISMATCH when it was
    wrong (the parent then asks torch and re-runs the variant cold); when it was right, the answer is
    exact from then on (``_confirm_cuda``)."""
    return (_CUDA, True) if _CUDA is not None else (cuda_likely(), False)


def cuda_likely() -> bool:
    """Whether torch will see a CUDA device, without importing torch (~4 s on a GPU host): a CUDA build
    of torch (``torch/lib/libtorch_cuda.so``), NVML reporting a GPU, and CUDA_VISIBLE_DEVICES not hiding
    them all. Only for guesses that a wrong answer cannot make wrong (the server's Triton mode: a variant
    needing the other one is re-run cold); ``_cuda_available`` answers exactly."""
    return _CUDA if _CUDA is not None else _probe_cuda()


@functools.cache
def _probe_cuda() -> bool:
    """cuda_likely's probe, once per process (every variant asks while torch is still importing)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")  # locates the package; does not import it
    roots = list(spec.submodule_search_locations or []) if spec else []
    if not any((Path(r) / "lib" / "libtorch_cuda.so").exists() for r in roots):
        return False
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (not visible.strip() or visible.strip().startswith("-")):
        return False
    count = nvml_gpu_count()
    return count > 0 if count is not None else _cuda_available()  # no NVML (or MIG): ask torch


def nvml_gpu_count() -> int | None:
    """The GPUs NVML sees (no CUDA context: safe before a fork), or None where NVML is missing or a GPU
    is in MIG mode (then ask torch)."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        count = pynvml.nvmlDeviceGetCount()
        for i in range(count):
            try:
                current, _ = pynvml.nvmlDeviceGetMigMode(pynvml.nvmlDeviceGetHandleByIndex(i))
            except Exception:  # NVMLError: not MIG-capable; AttributeError: an NVML without MIG
                continue
            if current:
                return None
        return count
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def prestart_server(config: BenchmarkConfig) -> bool:
    """Make sure this user's pre-warmed server for ``config``'s Triton mode is running; returns that mode.

    A server kept from an earlier command answers at once; otherwise one starts now and imports torch and
    triton (~4 s on a GPU host) while the parent goes on (importing mlflow, opening the store) instead of
    delaying the first variant. The mode comes from ``cuda_guess()``, not from importing torch here:
    that import would cost as long again, and the parent needs no torch (outputs are compared in a child
    of the server). A variant that turns out to need the other mode is re-run cold.
    """
    global _MODE
    from bench import server

    interpret = server_interpret(config)
    server.connect(interpret).close()  # connected: it listens (a new one is importing; requests wait)
    _MODE = interpret
    return interpret


def _signal_group(pid: int, sig: int) -> bool:
    """Signal the child's process group (or the child alone, before its setsid ran); False if gone."""
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False


def kill_group(proc: _Process) -> None:
    """TERM the child's process group, then KILL whatever is left after the grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 10.0)):
        if not _signal_group(proc.pid, sig):
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            # The leader died on TERM; make sure no grandchild survived it.
            _signal_group(proc.pid, signal.SIGKILL)
        return


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


class Cancelled(Exception):
    """``run_variant``'s ``cancel`` was set: its child was killed (an interrupted suite)."""


class _Watch:
    """State the parent keeps while one child runs."""

    def __init__(self, spec: VariantSpec, config: BenchmarkConfig, mode: str = "run") -> None:
        self.spec = spec
        self.mode = mode
        self.config = config
        self.stage = "startup"
        self.stage_t0 = time.monotonic()
        self.records: dict[str, StageRecord] = {}
        self.data: dict[str, Any] = {}
        self.error: ErrorInfo | None = None
        self.failed_stage: str | None = None
        self.done = False
        self.counts: dict[str, int] = {}  # data messages by kind: each is sent once by the harness
        self.gated_since: float | None = None  # the child waits at its gate (run_variant's ``gate``)
        self.ready_since: float | None = None  # set up, it waits to measure (run_variant's ``before_measure``)

    def limit(self) -> float:
        return self.config.stage_limit(self.stage)

    def timed_done(self) -> bool:
        """Every stage that calls benchmark_fn on the clock is over: the measurement, the batch and the
        recheck, as far as the config runs them (or the child is past them)."""
        timed = ["measurement"]
        timed += ["batch"] if self.config.measure_batch else []
        timed += ["recheck"] if self.config.check_inputs else []
        return self.stage == "teardown" or all(name in self.records for name in timed)

    def handle(self, msg: dict[str, Any]) -> None:
        kind = str(msg.get("t"))
        now = time.monotonic()
        if kind == "stage":
            name = msg["name"]
            if msg["event"] == "start":
                if name != "startup":  # startup's clock runs from the spawn
                    self.stage, self.stage_t0 = name, now
            else:
                self.records[name] = StageRecord(
                    name=name, status="ok", duration_s=now - self.stage_t0, limit_s=self.limit()
                )
        elif kind == "config":
            self.config = BenchmarkConfig(**msg["config"])  # limits from get_config() apply from now on
        elif kind == "error":
            self.failed_stage = msg["stage"]
            self.error = ErrorInfo(kind=msg["kind"], message=msg["message"], traceback=msg.get("traceback"))
        elif kind == "done":
            self.done = True
        elif kind == "gate":
            self.gated_since = now
        elif kind == "ready":
            self.ready_since = now
        else:
            self.data[kind] = msg
            self.counts[kind] = self.counts.get(kind, 0) + 1


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
) -> VariantResult:
    """Run one variant in a fresh child process and return its result; never raises for the child's faults.

    The child is forked from a pre-warmed server (heavy imports done once, CUDA never initialised
    there), or, with ``cold_start``, is a brand-new interpreter. Either way it is a new process in its
    own process group, and ``env`` (e.g. CUDA_VISIBLE_DEVICES) is its environment on top of ours.
    ``mode``: "run" (timed), "verify" (setup only) or "profile" (``profile_tool``'s profiled calls,
    bench.profiling). ``wrapper``: a command prefix (ncu, nsys) for a cold-started child; messages then
    travel through a FIFO, as a profiler need not pass descriptors through to the process it launches.
    ``gate``: start the child ahead and hold it before the benchmark's ``setup()`` until the gate opens
    (``Gate``; mode "run" without a wrapper only); if it ends before reaching the gate (a CUDA context
    that did not fit beside the previous variant's memory, say), it runs again plainly once the gate is
    open. ``on_measured``: called (on this thread) as soon as the child's timed stages (measurement, batch,
    recheck) have ended.
    ``cancel``: when set (by another thread: an interrupted suite), the child's group is killed and
    ``Cancelled`` raised. ``before_measure``: the child stops after its set-up, before its warm-up, and
    this is called with its effective config; it may wait (a host-bound measurement waiting to be alone on
    the host: suite._Host), and the wait counts against no limit; then the child goes on (mode "run",
    without a wrapper). ``measure_gate``: "all" (every child stops there) or "host_bound" (only one timed
    on the host's clock: ``bench.config.host_clocked``, decided by the child from its effective config).
    """
    if gate is not None and (mode != "run" or wrapper):
        gate.wait(cancel)  # only timed runs are held at a gate; the others start once it is open
        gate = None
    pre = resolve_config(suite_layer, cli_layer)
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    job = {
        "path": spec.path,
        "workdir": str(wd),
        "suite_layer": explicit_fields(suite_layer),
        "cli_layer": explicit_fields(cli_layer),
        "mode": mode,  # "run", "verify" (startup + setup + teardown) or "profile"
        "profile_tool": profile_tool,
        "gate": gate is not None,
        "measure_gate": measure_gate if before_measure is not None and mode == "run" and not wrapper else False,
    }
    guess, exact = cuda_guess()
    if pre.device == "auto" and not exact:
        job["cuda_expected"] = guess  # the child verifies the guess its environment was built on
    (wd / "job.json").write_text(json.dumps(job))

    def again(cold: bool) -> VariantResult:
        """This variant once more (cold, or plainly after a start ahead that ended early), once its gate
        is open; the caller says why in ``launch``."""
        if gate is not None:
            gate.wait(cancel)
        return run_variant(
            spec, wd, suite_layer, cli_layer, python, mode, cold, env, profile_tool, wrapper, cancel=cancel,
            before_measure=before_measure, measure_gate=measure_gate,
        )  # fmt: skip

    log_path = wd / "child.log"
    if wrapper:
        fifo = wd / "messages.fifo"
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
        # Opened read-write: no EOF before the child opens its end, so its exit is noticed by polling.
        read_fd, write_fd, channel_arg = os.open(fifo, os.O_RDWR | os.O_NONBLOCK), -1, str(fifo)
    elif gate is not None or job["measure_gate"]:  # both ways: messages up, the gates' "go" down
        parent_end, child_end = socket.socketpair()
        read_fd, write_fd = parent_end.detach(), child_end.detach()
        channel_arg = str(write_fd)
    else:
        read_fd, write_fd = os.pipe()
        channel_arg = str(write_fd)
    environment = child_env(pre, {**os.environ, **(env or {})})
    t0 = time.monotonic()
    proc: Any
    if cold_start or wrapper:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [*(wrapper or []), python, "-m", "bench._child", str(wd / "job.json"), channel_arg],
                pass_fds=(write_fd,) if write_fd >= 0 else (),
                start_new_session=True,  # own session ⇒ own process group, killable as a whole
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=str(wd),
            )
        if write_fd >= 0:
            os.close(write_fd)
    else:
        from bench import server

        interpret = environment.get("TRITON_INTERPRET") == "1"
        try:
            proc = server.spawn(
                "bench._child:entry", [str(wd / "job.json")], write_fd, environment, str(wd), str(log_path), interpret
            )
        except (OSError, server.ServerError) as exc:  # nothing is lost: the variant runs cold instead
            os.close(read_fd)
            os.close(write_fd)
            result = again(cold=True)
            result.launch = f"cold_start (fallback: the server failed: {exc})"
            return result
        os.close(write_fd)
        global _MODE
        _MODE = interpret
    watch = _Watch(spec, pre, mode)
    timed_out = interrupted = False
    buf = b""
    ahead_s: float | None = None  # spawn until the gate opened, for a child held at one
    let_through = False  # the child was sent its "go" at its gate
    gate_late_s: float | None = None
    measured = False
    try:
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{spec.key}: cancelled")
            if watch.gated_since is not None and gate is not None and gate.is_open():
                now = time.monotonic()
                watch.stage_t0 += now - watch.gated_since  # the wait counts against no limit
                ahead_s = max(0.0, (gate.opened_at or now) - t0)  # the part run beside the previous variant
                # The gate opened before the child got there: the worker waited for its start-up/CUDA context.
                gate_late_s = max(0.0, watch.gated_since - (gate.opened_at or now))
                watch.gated_since = None
                let_through = True
                with contextlib.suppress(OSError):  # a child that died meanwhile: its EOF ends the loop
                    os.write(read_fd, b"g")
            if watch.gated_since is not None:
                remaining, poll = math.inf, _GATE_POLL_S
            else:
                remaining = watch.stage_t0 + watch.limit() - time.monotonic()
                poll = min(remaining, _EXIT_POLL_S)
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_fd], [], [], poll)
            if not ready:
                # A grandchild forked by the benchmark (DataLoader-style worker) inherits the pipe, so
                # EOF may never come: stop once the child has exited and the pipe holds nothing more.
                if proc.poll() is not None and not select.select([read_fd], [], [], 0)[0]:
                    break
                continue  # loop re-checks the (possibly updated) deadline
            try:
                chunk = os.read(read_fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                break  # child closed the pipe: exited or crashed
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    watch.handle(json.loads(line))
            if gate is not None and watch.gated_since is not None:
                gate.arrived.set()
            if watch.ready_since is not None and before_measure is not None:  # set up: may it measure now?
                before_measure(watch.config, watch.data.get("device", {}).get("device"))
                watch.stage_t0 += time.monotonic() - watch.ready_since  # the wait counts against no limit
                watch.ready_since = None
                with contextlib.suppress(OSError):  # a child that died meanwhile: its EOF ends the loop
                    os.write(read_fd, b"m")
            if on_measured is not None and not measured and watch.timed_done():
                measured = True
                on_measured()
    except BaseException:  # Ctrl-C, or a fault of the harness: the child must not run on unwatched
        interrupted = True
        raise
    finally:
        os.close(read_fd)
        if timed_out or interrupted:
            kill_group(proc)
        else:
            try:
                proc.wait(timeout=watch.limit())
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
            else:
                kill_group(proc)  # reap any grandchild left in the group
    forked = not (cold_start or wrapper)
    if gate is not None and not let_through and not timed_out:
        # It ended before its gate opened (or never reached it): run it plainly once the gate is open,
        # so a failure of the start ahead (a CUDA context that found no room beside the previous
        # variant's memory, a benchmark object that allocated too much) is never the variant's record.
        result = again(cold=cold_start)
        result.launch = f"{result.launch} (again, without starting ahead: the first child ended before its gate)"
        return result
    mismatch = proc.returncode == _child.TRITON_MODE_MISMATCH and not watch.records and not watch.data
    if mismatch and "cuda_expected" in job:
        _cuda_available()  # the guess was wrong: ask torch; the cold re-run's environment is then exact
    if mismatch and (forked or "cuda_expected" in job):
        result = again(cold=True)
        result.launch = (
            f"cold_start (fallback: CUDA was guessed {'' if job['cuda_expected'] else 'un'}available, torch says "
            "otherwise)"
            if "cuda_expected" in job
            else "cold_start (fallback: the server imported Triton in the other interpreter mode)"
        )
        return result
    if "cuda_expected" in job and (watch.records or watch.data):
        _confirm_cuda(bool(job["cuda_expected"]))
    result = _build_result(watch, proc.returncode, timed_out, time.monotonic() - t0, log_path)
    result.cuda_visible_devices = environment.get("CUDA_VISIBLE_DEVICES")
    result.ahead_s = ahead_s
    result.gate_late_s = gate_late_s
    result.launch = "server" if forked else "cold_start"
    return result


def _log_tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-_LOG_TAIL:].decode(errors="replace")


def _build_result(
    watch: _Watch, returncode: int | None, timed_out: bool, elapsed: float, log_path: Path
) -> VariantResult:
    cfg = watch.config
    status: str = "ok"
    limit_s: float | None = None
    if timed_out:
        status, watch.failed_stage, limit_s = "timeout", watch.stage, watch.limit()
        watch.error = ErrorInfo(
            kind="timeout",
            message=f"stage {watch.stage!r} exceeded its limit of {limit_s:.1f}s; process group killed",
            traceback=_log_tail(log_path) or None,
        )
    elif "tampered" in watch.data:
        status, watch.failed_stage = "invalid", watch.data["tampered"]["stage"]
        names = ", ".join(watch.data["tampered"]["names"])
        watch.error = ErrorInfo(kind="invalid", message=f"timer replaced: {names} changed since the harness bound it")
    elif "skipped" in watch.data:
        status = "skipped"
    elif watch.error is not None:
        # A benchmark that does not follow the protocol failed at its set-up: "invalid" is kept for a result
        # the timed calls did not produce (or cannot stand).
        status = "failed"
        watch.error.exit_code = returncode
        if watch.error.kind != "protocol":
            watch.error.traceback = (watch.error.traceback or "") + _tail_section(log_path)
    elif not watch.done or returncode != 0:
        status, watch.failed_stage = "failed", watch.stage
        from bench.server import SERVER_LOST

        how = (
            f"killed by signal {signal.Signals(-returncode).name}"
            if returncode and returncode < 0
            else "ended with its exit status unknown: the pre-warmed server that forked it died first"
            if returncode == SERVER_LOST
            else f"exited with code {returncode}"
        )
        watch.error = ErrorInfo(
            kind="crash",
            message=f"child {how} during stage {watch.stage!r}",
            traceback=_log_tail(log_path) or None,
            exit_code=returncode,
        )

    stages = _stage_records(watch, status, limit_s)
    data = watch.data
    result = VariantResult(
        spec=watch.spec,
        status=status,  # type: ignore[arg-type]
        failed_stage=watch.failed_stage if status != "ok" else None,
        elapsed_s=elapsed,
        limit_s=limit_s,
        stages=stages,
        error=watch.error,
        config=cfg.model_dump(),
        device=data.get("device", {}).get("device"),
        manifest=data.get("device", {}).get("manifest", {}),
        skip_reason=data["skipped"]["reason"] if status == "skipped" else None,
        sizes=data.get("sizes", {}).get("sizes", {}),
    )
    if "timing" in data:
        t = data["timing"]
        if t["samples_ms"]:
            result.timing = Timing(
                **{k: v for k, v in t.items() if k != "t" and not (k == "noise" and v == float("inf"))},
                stats=summarize(t["samples_ms"], cfg.percentiles),
            )
    if "batch" in data and data["batch"]["samples_ms"]:
        b = data["batch"]
        result.batch = BatchTiming(
            **{k: v for k, v in b.items() if k in BatchTiming.model_fields and k != "stats"},
            stats=summarize(b["samples_ms"], cfg.percentiles),
        )
    if "restore" in data or "fresh" in data:
        r, f = data.get("restore", {}), data.get("fresh", {})
        result.recheck = Recheck(
            mutated=r.get("mutated", []),
            restored_ms=r.get("time_ms"),
            reference_ms=r.get("reference_ms"),
            controlled=bool(r.get("controlled")),
            restored_times_ms=r.get("times_ms", []),
            reference_times_ms=r.get("reference_times_ms", []),
            restored_same_output=r.get("same_output"),
            perturbed=f.get("perturbed"),
            output_changed=f.get("output_changed"),
            fresh=OutputInfo(path=f["path"], tensors=f["tensors"]) if f.get("path") else None,
        )
    if "tampered" in data:
        result.tampered = list(data["tampered"]["names"])
    if "memory" in data:
        result.memory = Memory(**{k: v for k, v in data["memory"].items() if k != "t"})
    if "work" in data:
        result.work = Work(**{k: v for k, v in data["work"].items() if k != "t"})
    if "profile" in data and data["profile"].get("dir"):
        p = data["profile"]
        result.profile = Profile(dir=p["dir"], metrics=p.get("metrics", {}), top_ops=p.get("top_ops", []))
    if "output" in data:
        o = data["output"]
        result.output = OutputInfo(
            path=o["path"], tensors=o["tensors"], timed_calls_wrote_output=o["timed_calls_wrote_output"]
        )
    if "validation" in data:
        result.validation = data["validation"]["message"]
    if "cuda_start" in data:
        result.cuda_start_s = data["cuda_start"]["start_s"]
    if "generation" in data:  # token-generating benchmarks (bench.generation)
        result.generation = Generation(**{k: v for k, v in data["generation"].items() if k != "t"})
    if result.status == "ok":
        _apply_checks(result, watch.counts)
    return result


def _tail_section(log_path: Path) -> str:
    tail = _log_tail(log_path)
    return f"\n--- child output (tail) ---\n{tail}" if tail.strip() else ""


def _apply_checks(result: VariantResult, counts: dict[str, int] | None = None) -> None:
    """A run that finished but whose own numbers or result cannot stand is ``invalid``, with the reason
    and the stage where it showed (INTEGRITY #13: a problem seen is never counted as ok)."""
    stage, reason = _invalid_reason(result, counts or {})
    if reason:
        result.status = "invalid"
        result.failed_stage = stage
        result.error = ErrorInfo(kind="invalid", message=reason)


def _invalid_reason(result: VariantResult, counts: dict[str, int]) -> tuple[str | None, str | None]:
    repeated = sorted(k for k, n in counts.items() if n > 1)
    if repeated:
        return "measurement", f"messages the harness sends once arrived more than once ({', '.join(repeated)})"
    t = result.timing
    if t is not None and t.invalid:
        return "measurement", t.invalid
    if result.validation:
        return "check", f"validate_result(): {result.validation}"
    if result.output and result.output.timed_calls_wrote_output is False:
        return "check", (
            "output still holds the NaN poison written before measurement: the timed calls did not "
            "(fully) write the output (result precomputed in setup?) or they produced NaN"
        )
    r = result.recheck
    if r is not None and r.mutated and result.median_ms:
        what = ", ".join(r.mutated[:4])
        if r.restored_same_output is False:
            return "recheck", (
                f"the timed calls changed tensors set up in setup() ({what}), and a call from the set-up state "
                "gives a different output: the timed calls ran on what earlier calls left behind"
            )
        usual = r.reference_ms or (t.stats.median_ms if t is not None else None)
        if r.controlled:  # B: a fresh set-up holding what the timed calls left; A from the set-up state
            high = _child.RESTORE_SLOWER * usual + _child.RESTORE_FLOOR_MS if usual else None
            if high and not _consistently_slower(r.restored_times_ms, r.reference_times_ms):
                high = None  # one lucky B or a busy host, not skipped work
        else:
            high = max(2.0 * usual, t.stats.percentiles_ms.get("p99", 0.0) if r.reference_ms is None and t else 0.0) \
                if usual else None  # fmt: skip
        if r.restored_ms is not None and usual and high and r.restored_ms > high:
            against = "the same set-up holding what they left" if r.controlled else "a usual call"
            return "recheck", (
                f"the timed calls changed tensors set up in setup() ({what}), and a call from the set-up state "
                f"takes {r.restored_ms / usual:.1f}x {against} ({r.restored_ms:.4g} vs {usual:.4g} ms): the "
                "timed calls did less work than a call on the inputs"
            )
    if r is not None and r.output_changed is False:
        return "recheck", (
            f"the output did not change when the {r.perturbed} tensor(s) set up in setup() were changed: a cached "
            "or precomputed result (a benchmark whose output truly ignores them declares get_inputs())"
        )
    implausible = _faster_than_hardware(result)
    if implausible:
        return "measurement", implausible
    return None, None


def _consistently_slower(a_ms: list[float], b_ms: list[float]) -> bool:
    """A's rounds slower than B's beyond chance: a one-sided Mann-Whitney test at 1 %. Two rounds each (the
    child's first, when nothing looked slow) can never pass it; the child runs more rounds when A looks slower,
    and a busy host that slows calls at random passes it about once in 150 such variants (simulated)."""
    if len(a_ms) < 3 or len(b_ms) < 3:
        return False
    from scipy.stats import mannwhitneyu

    return bool(mannwhitneyu(a_ms, b_ms, alternative="greater").pvalue < RESTORE_P)


RESTORE_P = 0.01

# A variant may beat a measured ceiling by this much (clock and measurement spread) before it is refused.
PLAUSIBLE_MARGIN = 1.10


def _faster_than_hardware(result: VariantResult) -> str | None:
    """Achieved bandwidth above the device's measured L2 bandwidth, or FLOP/s above its fastest measured
    matmul, by more than 10 %: no real kernel does that (INTEGRITY #13). Needs `perflab peak`'s cache."""
    from bench.peaks import hardware_key, lookup

    derived = result.derived_metrics()
    if not derived:
        return None
    ceilings = lookup(hardware_key(result))
    if not ceilings:
        return None
    gbps, tflops = derived.get("achieved_gbps"), derived.get("achieved_tflops")
    l2 = ceilings.get("l2_gbps")
    if gbps and l2 and gbps > PLAUSIBLE_MARGIN * l2:
        return (
            f"faster than the hardware: {gbps:.0f} GB/s of declared traffic is more than {PLAUSIBLE_MARGIN:.2f}x the "
            f"measured L2 bandwidth ({l2:.0f} GB/s, perflab peak)"
        )
    matmul = {k: v for k, v in ceilings.items() if k.endswith("_tflops")}
    if tflops and matmul:
        name, peak = max(matmul.items(), key=lambda kv: kv[1])
        if tflops > PLAUSIBLE_MARGIN * peak:
            return (
                f"faster than the hardware: {tflops:.1f} TFLOP/s of declared work is more than "
                f"{PLAUSIBLE_MARGIN:.2f}x the fastest measured matmul ({name.removesuffix('_tflops')}: {peak:.0f} "
                "TFLOP/s, perflab peak)"
            )
    return None


def _stage_records(watch: _Watch, status: str, limit_s: float | None) -> list[StageRecord]:
    records = []
    skip = {"run": ("profiling",), "verify": ("warmup", "measurement", "check", "profiling")}
    for name in STAGES:
        if name in skip.get(watch.mode, ("measurement", "check")):  # profile children time nothing
            continue
        if name in watch.records:
            records.append(watch.records[name])
        elif name == watch.failed_stage:
            records.append(
                StageRecord(
                    name=name,
                    status="timeout" if status == "timeout" else "failed",
                    duration_s=time.monotonic() - watch.stage_t0,
                    limit_s=limit_s or watch.config.stage_limit(name),
                )
            )
        else:
            records.append(StageRecord(name=name, status="not_reached"))
    return records
