"""The child's end of its message channel: messages up (one JSON object per line), the holds' "go" down, and
stages announced to the parent (and marked as NVTX ranges ``perflab:<stage>``).

Data (effective config, timing samples, memory, outputs, manifest) travel as messages as soon as they
exist, so a crash late in the run keeps what was measured before it. A stage that raises ends the child at
once (``os._exit``: teardown paths may hang) after sending the error; ``Skip`` (``context().require()``) ends
it as skipped.
"""

from __future__ import annotations

import json
import os
import traceback
from typing import Any, Literal

# An example's file of its parked children's pids, one a line, beside its variants' work directories
# (bench.isolate.kept): each child's NVML readings list them apart from other processes on the GPU.
PARKED_FILE = "parked.pids"
_fd: int = -1  # the channel: a descriptor from the parent or the server, or a FIFO opened for a profiler


def attach(fd: int) -> None:
    """Send on ``fd`` from now on."""
    global _fd
    _fd = fd


def send(kind: str, /, **payload: Any) -> None:
    # Positional-only: error messages carry their own "kind" field in the payload.
    _write((json.dumps({"t": kind, **payload}, default=str) + "\n").encode())


def forward(line: bytes) -> None:
    """Pass on one message another process sent (a rank's: bench.isolate.ranks), as it came."""
    _write(line.rstrip(b"\n") + b"\n")


def _write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(_fd, view)
        view = view[n:]


def wait_for(go: bytes) -> None:
    """Block until the parent sends ``go`` (a hold is released); exit when the parent is gone (EOF)."""
    if os.read(_fd, 1) != go:
        os._exit(4)


def command() -> dict[str, Any]:
    """A parked child's next order from the parent (bench.isolate.kept), one JSON line: another round's
    (``{"round": n, ...}``) or ``{"end": true}``; exit when the parent is gone (EOF)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(_fd, 1)
        if not byte:
            os._exit(4)
        line += byte
    return json.loads(line)


def _push(name: str) -> None:
    """Open the NVTX stage range ``name`` (bench.profile.markers: nvtx imported at the first range; the server
    preloads it, and the parent, which imports this module, never needs it)."""
    from bench.profile.markers import _module

    nvtx = _module()
    if nvtx is not None:
        nvtx.push_range(name)


def _pop() -> None:
    from bench.profile.markers import _module

    nvtx = _module()
    if nvtx is not None:
        nvtx.pop_range()


class Stage:
    """Announces a stage to the parent and marks it as the NVTX range ``perflab:<stage>``."""

    def __init__(self, name: str, mark: bool = True) -> None:
        self.name = name
        self.mark = mark

    def __enter__(self) -> None:
        os.environ["PERFLAB_STAGE"] = self.name  # which stage a benchmark's code runs in (test fixtures read it)
        send("stage", name=self.name, event="start")
        if self.mark:
            _push(f"perflab:{self.name}")

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is None:
            if self.mark:
                _pop()
            send("stage", name=self.name, event="end")
            return False
        if type(exc).__name__ == "Skip":  # context().require()/skip(): this host cannot run the variant
            send("skipped", stage=self.name, reason=str(exc))
            os._exit(0)
        kind = "protocol" if type(exc).__name__ == "ProtocolError" else "exception"
        send(
            "error",
            stage=self.name,
            kind=kind,
            message=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )
        os._exit(3)  # skip teardown paths that may hang; the parent records the failure
