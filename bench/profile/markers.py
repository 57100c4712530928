"""NVTX ranges: the harness marks its stages and timed calls, a benchmark may add its own.

Ranges go through the ``nvtx`` package (default NVTX domain) when it is importable and are no-ops
otherwise. They cost nothing a profiler does not ask for: without a tool attached (Nsight Compute or
Systems set ``NVTX_INJECTION64_PATH`` in the process they launch) ``per_call`` returns the benchmark's
function unwrapped, so a timed child never pays for the per-call ranges.

Names: the harness's stages are ``perflab:<stage>``; in the profile child the profiled calls sit
inside ``perflab_timed`` (the outermost range there, which ``ncu --nvtx-include`` filters on), each
call inside ``perflab_call``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@functools.cache
def _module() -> Any:
    """The nvtx package, imported at the first range (it imports numpy: ~0.06-0.2 s the CLI's start-up,
    which imports this module, need not pay); None when it is not installed (ranges are no-ops)."""
    try:
        import nvtx
    except ImportError:
        return None
    return nvtx


TIMED_RANGE = "perflab_timed"
CALL_RANGE = "perflab_call"


@contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX push/pop range around a block (``with bench.nvtx_range("softmax"):``); no-op without nvtx."""
    nvtx = _module()
    if nvtx is None:
        yield
        return
    nvtx.push_range(name)
    try:
        yield
    finally:
        nvtx.pop_range()


def tool_attached() -> bool:
    """Whether an NVTX tool (ncu, nsys) listens in this process."""
    return bool(os.environ.get("NVTX_INJECTION64_PATH")) and _module() is not None


def per_call(fn: Callable[[], Any], name: str = CALL_RANGE) -> Callable[[], Any]:
    """``fn`` with one range per call when a tool listens; ``fn`` itself otherwise.

    Harmless to timing: unwrapped in every timed child (no tool attached there). Under a tool the
    push/pop is ~0.5 µs of host work per call; on the GPU clocks it runs while the GPU still spins
    behind the spin kernel queued before the start event, so the CUDA events never see it.
    """
    if not tool_attached():
        return fn
    nvtx = _module()
    push, pop = nvtx.push_range, nvtx.pop_range

    def marked() -> Any:
        push(name)
        try:
            return fn()
        finally:
            pop()

    return marked
