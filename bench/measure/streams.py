"""Whether a call's work is where the GPU clock's events can see it (INTEGRITY #3, #13).

Events on the current stream time only the work ordered on it. Two ways work escapes them, each decided here by
the device's order, not by a time:

* **Side streams.** Every stream the call makes current (noted during warm-up through
  ``bench.measure.guard.BOUND.streams_made_current``) must be forked from the current stream and joined back to
  it. ``unjoined`` probes both: (fork) a spin kernel holds the current stream, and a side stream's work that
  completes before the spin does did not wait for it; (join) spin kernels hold the side streams, and a current
  stream that gets past the call before they do did not wait for them.
* **Captured calls.** A call captured in a CUDA graph must write its own outputs when replayed: work put on a
  stream outside the capture runs once, at capture, never in a replay. ``unwritten`` poisons the outputs, replays
  and finds the ones left poisoned.

Each returns the reason the measurement is invalid, or None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.measure.clocks import Fn
from bench.measure.guard import BOUND, has_nan
from bench.measure.outputs import writable


def side_streams(device: Any, seen: set[tuple[int, int, int]]) -> list[Any]:
    """The streams in ``seen`` (stream_id, device_index, device_type) other than the current one."""
    current = BOUND.current_stream(device)
    mine = (current.stream_id, current.device_index, current.device_type)
    return [
        BOUND.Stream(stream_id=sid, device_index=index, device_type=kind)
        for sid, index, kind in sorted(seen)
        if (sid, index, kind) != mine
    ]


def unjoined(fn: Fn, device: Any, sides: list[Any], hold: int) -> str | None:
    """Why ``fn``'s work on ``sides`` escapes the current stream's events (``hold``: spin cycles), or None."""
    unforked, late = _probe_fork(fn, device, sides, hold), _probe_join(fn, device, sides, hold)
    if not unforked and not late:
        return None
    what = []
    if unforked:
        what.append(f"work on stream(s) {', '.join(unforked)} starts without waiting for the current stream")
    if late:
        what.append(f"the current stream does not wait for stream(s) {', '.join(late)} before the call returns")
    return (
        f"work on an unjoined side stream: {'; '.join(what)}, so events on the current stream do not cover all of "
        "the call's work (fork with side.wait_stream(current), join with current.wait_stream(side))"
    )


def _probe_fork(fn: Fn, device: Any, sides: list[Any], hold: int) -> list[str]:
    BOUND.synchronize(device)
    BOUND.spin(hold)
    spun = BOUND.Event()
    BOUND.record(spun)
    fn()
    marks = [(s, BOUND.Event()) for s in sides]
    for s, e in marks:
        BOUND.record(e, s)
    early: set[str] = set()
    while not BOUND.query(spun):  # the current stream still spins: a side mark done now ran ahead
        early |= {str(s.stream_id) for s, e in marks if BOUND.query(e)}
    BOUND.synchronize(device)
    return sorted(early)


def _probe_join(fn: Fn, device: Any, sides: list[Any], hold: int) -> list[str]:
    BOUND.synchronize(device)
    for s in sides:
        with BOUND.torch.cuda.stream(s):  # type: ignore[union-attr]
            BOUND.spin(hold)
    fn()
    end = BOUND.Event()
    BOUND.record(end)
    marks = [(s, BOUND.Event()) for s in sides]
    for s, e in marks:
        BOUND.record(e, s)
    BOUND.event_synchronize(end)
    late = [str(s.stream_id) for s, e in marks if not BOUND.query(e)]
    BOUND.synchronize(device)
    return late


def unwritten(replays: list[Fn], outputs: Callable[[], list[Any] | None], device: Any) -> str | None:
    """Why a replay of a captured call leaves its outputs unwritten, or None. Floating outputs are poisoned with
    NaN, others with their dtype's lowest value (True for bool); an output a replay leaves poisoned (and that did
    not read so before) is the reason. The checks are reductions to a scalar: no temporaries billed to the
    variant's memory."""
    tensors = outputs() if replays else None
    if not tensors:
        return None
    watched = [i for i, t in enumerate(tensors) if t.numel() and not _poisoned(t)]
    for replay in replays:
        for i in watched:
            t = tensors[i]
            with writable(t):
                t.fill_(float("nan") if t.is_floating_point() or t.is_complex() else _sentinel(t))
        replay()
        BOUND.synchronize(device)
        left = [i for i in watched if _poisoned(tensors[i])]
        if left and "cuda" in str(device) and all(tensors[i].device.type == "cpu" for i in left):
            return (
                f"output(s) {', '.join(map(str, left))} are in host memory (CPU tensors) and a CUDA-graph replay of "
                "the call left them unwritten: its work runs on the host, which CUDA events do not time; put its "
                "tensors on the GPU (device='cuda'), or measure it on the host's clock with --device cpu"
            )
        if left:
            return (
                f"a CUDA-graph replay of one call did not write output(s) {', '.join(map(str, left))} (they kept "
                "the NaN poison written before it): the call's work runs outside its stream (an unjoined side "
                "stream, the host) or not at all (a result precomputed in setup?), and events time none of it"
            )
    return None


def _sentinel(t: Any) -> Any:
    import torch

    return True if t.dtype == torch.bool else torch.iinfo(t.dtype).min


def _poisoned(t: Any) -> bool:
    """A floating tensor holding a NaN, another one entirely its sentinel."""
    import torch

    if t.is_floating_point() or t.is_complex():
        return has_nan(t)
    if t.dtype == torch.bool:
        return bool(t.all())
    return bool(t.max() == _sentinel(t))
