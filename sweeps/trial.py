"""Parent side of one trial: the workload runs in its own child process, in its own process group, with a deadline.

Same isolation as ``bench.isolate.runner``'s fast path: the child is forked from a forkserver that imported
torch/h5py once (CUDA never initialised there), calls ``setsid`` so the parent can kill the whole
group — DataLoader workers included — and reports through a JSON file. A child that exceeds the
deadline is TERMed, then KILLed (``bench.isolate.kill_group``); one that dies without a report is
``failed`` with its log tail; ``torch.OutOfMemoryError`` (real or simulated) is ``oom``; a workload
that returned the wrong thing is ``failed`` with ``workload_error`` set (the sweep stops on it: every trial
would fail the same way), one whose ``make`` raised for these settings only ``failed``. With
``should_prune``, the parent reads the child's interim throughput once (``sweeps.measure``) and may kill a
clearly worse trial: status ``pruned``, with the interim numbers.

What isolation costs is measured per trial (``ok`` trials' metrics, seconds): ``trial_wall_s`` from
asking the server for a child to the child reaped and its report read; ``steps_time_s`` the
warm-up and measured steps; ``overhead_s`` = wall − steps, split into ``startup_s`` (fork from the
server until the child runs), ``setup_s`` (data, model, CUDA context) and ``teardown_s`` (read-out,
report, exit, reaping the group). The server's own start (imports) is paid once per sweep, in
:func:`start_server`, not by the first trial.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from sweeps.measure import TrialJob

__all__ = ["TrialOutcome", "run_trial", "start_server"]

Status = Literal["ok", "oom", "timeout", "failed", "pruned"]
# torch._dynamo: optimizers import it lazily on first construction (~1.7 s a trial otherwise). PIL is
# the CNN's decoder (a missing preload is skipped by the server, not an error).
PRELOAD = ["torch", "torch._dynamo", "h5py", "numpy", "psutil", "PIL.Image", "sweeps.data", "sweeps.measure",
           "sweeps.probe", "sweeps.workload", "sweeps.builtins"]  # fmt: skip
_LOG_TAIL = 3000
_POLL_S = 0.05  # how often the parent looks for the interim report while a prunable trial runs


@dataclass
class TrialOutcome:
    status: Status
    metrics: dict[str, Any] = field(default_factory=dict)  # workload.measure()'s dict when ok
    error: str | None = None
    elapsed_s: float = 0.0  # launch to reaped (trial_wall_s of an ok trial)
    workload_error: bool = False  # the workload returned the wrong thing: no configuration will run


_extra_preload: list[str] = []


def _context() -> Any:
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD + _extra_preload)  # takes effect when the server starts (first trial)
    return ctx


def _noop() -> None:
    pass


@contextlib.contextmanager
def _server_imports_this_perflab() -> Iterator[None]:
    """While a trial starts (and, the first time, the forkserver with it): ``PYTHONPATH`` leads with the
    directory this ``sweeps`` package lives in. The server is a fresh interpreter that ignores the
    parent's ``sys.path`` (CPython before 3.13 drops it) and resolves ``''`` against the current
    directory: a sweep started elsewhere would run another installed copy of perflab in its trials."""
    root = str(Path(__file__).resolve().parents[1])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = root + (os.pathsep + old if old else "")
    try:
        yield
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def start_server(preload: Sequence[str] = ()) -> float:
    """Start the forkserver and wait until it has imported PRELOAD (and ``preload``: the user's workload
    module); the seconds that took (~0 if running: then ``preload`` comes too late, and costs each trial
    its import instead).

    ``ensure_running`` returns before the server's imports finish; a first child forked from it
    waits for them, so one no-op child here keeps the import time out of the first trial's overhead.
    """
    _extra_preload[:] = [m for m in preload if m not in PRELOAD]
    t0 = time.monotonic()
    p = _context().Process(target=_noop)
    with _server_imports_this_perflab():
        p.start()
    p.join()
    return time.monotonic() - t0


def _end_with_sweep(sweep_pid: int) -> None:
    """Kill this trial's process group (itself, its DataLoader workers) when the sweep's process is gone (killed,
    interrupted): in a session of its own, a trial is reached by neither a signal to the sweep's group nor the
    sweep's deadline, and the forkserver stays up while a child of its lives. A thread blocked on a pidfd of the
    sweep's process (polled each second where there is none); costs nothing while the sweep lives."""
    import select
    import signal
    import threading

    try:
        pidfd: int | None = os.pidfd_open(sweep_pid)
    except ProcessLookupError:
        os._exit(1)  # gone already
    except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
        pidfd = None

    def watch() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])
        else:
            while _alive(sweep_pid):
                time.sleep(1.0)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="perflab-sweep-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _entry(job: dict[str, Any], out_path: str, log_path: str) -> None:
    """Child: own process group, ended with the sweep, output to the log, result (or error) to ``out_path``."""
    entered = time.monotonic()
    os.setsid()
    _end_with_sweep(job.pop("sweep_pid"))  # after setsid: the group it kills is this trial's
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    import torch

    from sweeps.measure import measure
    from sweeps.workload import WorkloadError, WorkloadRaised

    try:
        if job.get("mode") == "probe":
            from sweeps.probe import probe

            report: dict[str, Any] = {"status": "ok", "metrics": probe(TrialJob(**job)), "entered": entered}
        else:
            report = {"status": "ok", "metrics": measure(TrialJob(**job)), "entered": entered}
    except torch.OutOfMemoryError as exc:
        report = {"status": "oom", "error": str(exc).splitlines()[0] if str(exc) else "out of memory"}
    except WorkloadRaised as exc:  # the workload's own code, for these settings: this trial fails, with where
        traceback.print_exception(exc.__cause__ or exc)
        report = {"status": "oom" if _says_oom(exc.__cause__) else "failed", "error": str(exc)}
    except WorkloadError as exc:
        report = {"status": "failed", "error": str(exc), "workload_error": True}
    except Exception as exc:
        traceback.print_exc()
        report = {"status": "oom" if _says_oom(exc) else "failed",
                  "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}  # fmt: skip
    tmp = out_path + ".tmp"
    Path(tmp).write_text(json.dumps(report))
    os.replace(tmp, out_path)  # the parent never reads a half-written report
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: DataLoader workers are reaped with the group


def _says_oom(exc: BaseException | None) -> bool:
    """An out-of-memory error by its message (a RuntimeError from cuBLAS/cuDNN workspaces, or one the job's own
    code raised as PyTorch before 2.1 did): the trial's status is ``oom``, and larger batches are skipped."""
    return exc is not None and ("out of memory" in str(exc).lower() or "ALLOC_FAILED" in str(exc))


Pruner = Callable[[dict[str, Any]], str | None]  # interim numbers -> the reason to stop the trial, or None


def _wait(process: Any, timeout_s: float, progress: Path, should_prune: Pruner | None) -> tuple[bool, str | None]:
    """Join the child within ``timeout_s``; (timed out, prune reason). Polls only while a pruner waits
    for the interim report, which comes once."""
    t0 = time.monotonic()
    while should_prune is not None and process.exitcode is None:
        left = timeout_s - (time.monotonic() - t0)
        if left <= 0:
            return True, None
        process.join(min(_POLL_S, left))
        if progress.exists():
            reason = should_prune(json.loads(progress.read_text()))
            if reason is not None:
                return False, reason
            break
    process.join(max(0.0, timeout_s - (time.monotonic() - t0)))
    return time.monotonic() - t0 >= timeout_s, None


class ForkedProcess:
    """A trial's multiprocessing.Process (forked by the forkserver) watched as a Popen: ``pid``, ``poll``, ``wait``,
    ``returncode``: what ``bench.isolate.kill_group`` takes."""

    def __init__(self, process: Any) -> None:
        self._p = process
        self.pid: int = process.pid

    def poll(self) -> int | None:
        return self._p.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._p.join(timeout)
        if self._p.exitcode is None:
            raise subprocess.TimeoutExpired("trial child", timeout or 0.0)
        return int(self._p.exitcode)

    @property
    def returncode(self) -> int | None:
        return self._p.exitcode


def run_trial(
    job: TrialJob, timeout_s: float, workdir: str | Path | None = None, should_prune: Pruner | None = None
) -> TrialOutcome:
    """Run ``job`` in an isolated child; never raises for the child's faults."""
    from bench.isolate import kill_group

    with tempfile.TemporaryDirectory(prefix="perflab-trial-") as tmp:
        wd = Path(workdir) if workdir is not None else Path(tmp)
        wd.mkdir(parents=True, exist_ok=True)
        out, log, progress = wd / "trial.json", wd / "trial.log", wd / "progress.json"
        for f in (out, progress):
            f.unlink(missing_ok=True)
        if should_prune is not None and job.prune_after_steps:
            job = replace(job, progress_path=str(progress))
        else:
            should_prune = None
        args = ({**asdict(job), "sweep_pid": os.getpid()}, str(out), str(log))
        process = _context().Process(target=_entry, args=args)
        launched = time.monotonic()
        with _server_imports_this_perflab():
            process.start()  # returns once the (pre-warmed) server forked the child
        timed_out, pruned = _wait(process, timeout_s, progress, should_prune)
        proc = ForkedProcess(process)
        kill_group(proc)  # on timeout or pruning: TERM/KILL; otherwise reaps stray DataLoader workers
        if pruned is not None:
            interim = json.loads(progress.read_text())
            return TrialOutcome(
                "pruned", {f"interim_{k}": v for k, v in interim.items()}, pruned, time.monotonic() - launched
            )
        if process.exitcode is None or (timed_out and not out.exists()):
            return TrialOutcome(
                "timeout", error=f"trial exceeded {timeout_s:.1f}s; process group killed",
                elapsed_s=time.monotonic() - launched,
            )  # fmt: skip
        if not out.exists():
            tail = log.read_text(errors="replace")[-_LOG_TAIL:] if log.exists() else ""
            return TrialOutcome(
                "failed", error=f"child exited with code {process.exitcode} without a report\n{tail}",
                elapsed_s=time.monotonic() - launched,
            )  # fmt: skip
        report = json.loads(out.read_text())
        done = time.monotonic()
        error = report.get("error")
        tail = log.read_text(errors="replace")[-_LOG_TAIL:].strip() if log.exists() else ""
        if report["status"] == "failed" and tail and not report.get("workload_error"):
            error = f"{error}\n{tail}"  # the traceback: the first line stays the message
        metrics = report.get("metrics", {})
        clock = metrics.pop("clock", None)
        if clock is not None and "entered" in report:
            metrics.update(_overhead(launched, report["entered"], clock, done))
        return TrialOutcome(report["status"], metrics, error, done - launched, bool(report.get("workload_error")))


def _overhead(launched: float, entered: float, clock: dict[str, float], done: float) -> dict[str, float]:
    """What the trial cost beyond its steps, from time.monotonic() stamps of parent and child."""
    steps = clock["steps_end"] - clock["steps_start"]
    return {
        "trial_wall_s": done - launched,
        "steps_time_s": steps,
        "overhead_s": done - launched - steps,
        "startup_s": entered - launched,
        "setup_s": clock["steps_start"] - entered,
        "teardown_s": done - clock["steps_end"],
    }
