"""Parent side of one trial: the workload runs in its own child process, in its own process group, with a deadline.

Same isolation as ``bench.runner``'s fast path: the child is forked from a forkserver that imported
torch/h5py once (CUDA never initialised there), calls ``setsid`` so the parent can kill the whole
group — DataLoader workers included — and reports through a JSON file. A child that exceeds the
deadline is TERMed, then KILLed (``bench.runner.kill_group``); one that dies without a report is
``failed`` with its log tail; ``torch.OutOfMemoryError`` (real or simulated) is ``oom``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from sweeps.workload import TrialJob

__all__ = ["TrialOutcome", "run_trial"]

Status = Literal["ok", "oom", "timeout", "failed"]
# torch._dynamo: optimizers import it lazily on first construction (~1.7 s a trial otherwise).
PRELOAD = ["torch", "torch._dynamo", "h5py", "numpy", "psutil", "sweeps.data", "sweeps.workload", "bench.machine"]
_LOG_TAIL = 3000


@dataclass
class TrialOutcome:
    status: Status
    metrics: dict[str, Any] = field(default_factory=dict)  # workload.measure()'s dict when ok
    error: str | None = None
    elapsed_s: float = 0.0


def _context() -> Any:
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # takes effect when the server starts (first trial)
    return ctx


def _entry(job: dict[str, Any], out_path: str, log_path: str) -> None:
    """Child: own process group, output to the log, result (or error) to ``out_path``."""
    os.setsid()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    import torch

    from sweeps.workload import measure

    try:
        report: dict[str, Any] = {"status": "ok", "metrics": measure(TrialJob(**job))}
    except torch.OutOfMemoryError as exc:
        report = {"status": "oom", "error": str(exc).splitlines()[0] if str(exc) else "out of memory"}
    except Exception as exc:
        traceback.print_exc()
        report = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    tmp = out_path + ".tmp"
    Path(tmp).write_text(json.dumps(report))
    os.replace(tmp, out_path)  # the parent never reads a half-written report
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: DataLoader workers are reaped with the group


def run_trial(job: TrialJob, timeout_s: float, workdir: str | Path | None = None) -> TrialOutcome:
    """Run ``job`` in an isolated child; never raises for the child's faults."""
    from bench.runner import ForkedProcess, kill_group

    with tempfile.TemporaryDirectory(prefix="perflab-trial-") as tmp:
        wd = Path(workdir) if workdir is not None else Path(tmp)
        wd.mkdir(parents=True, exist_ok=True)
        out, log = wd / "trial.json", wd / "trial.log"
        out.unlink(missing_ok=True)
        process = _context().Process(target=_entry, args=(asdict(job), str(out), str(log)))
        process.start()  # returns once the (pre-warmed) server forked the child
        t0 = time.monotonic()
        process.join(timeout_s)
        elapsed = time.monotonic() - t0
        proc = ForkedProcess(process)
        kill_group(proc)  # on timeout: TERM/KILL; otherwise reaps stray DataLoader workers
        if process.exitcode is None or (elapsed >= timeout_s and not out.exists()):
            return TrialOutcome(
                "timeout", error=f"trial exceeded {timeout_s:.1f}s; process group killed", elapsed_s=elapsed
            )
        if not out.exists():
            tail = log.read_text(errors="replace")[-_LOG_TAIL:] if log.exists() else ""
            return TrialOutcome(
                "failed", error=f"child exited with code {process.exitcode} without a report\n{tail}", elapsed_s=elapsed
            )
        report = json.loads(out.read_text())
        error = report.get("error")
        if report["status"] == "failed" and log.exists():
            error = f"{error}\n{log.read_text(errors='replace')[-_LOG_TAIL:]}"
        return TrialOutcome(report["status"], report.get("metrics", {}), error, elapsed)


