"""Per op or kernel name, the time a torch.profiler session spent, for the profile's top-ops table.

* GPU: device time of the kernels, copies and sets. A GPU-side annotation (``gpu_user_annotation``, e.g. an
  optimizer's ``Optimizer.step#AdamW.step``) spans kernels already counted, so it is left out: counted, the
  annotation of a step read 81 % of a ch13 step's device time on the H200, over its own kernels.
* CPU: self CPU time — an op's or annotation's time on its thread less that of the ops nested in it.

Read from the profiler's raw (Kineto) events. ``key_averages()``, which builds a Python object per event and nests
them, is the fallback only, where a torch lacks the raw events: on our 2-core CPU host it took 9 s for a 3-call
trace of 100,000 events that this reads in about 1 s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

OpTimes = list[tuple[str, int, float]]  # name, count, µs over the profiled calls


def op_times(prof: Any, gpu: bool) -> OpTimes:
    """The profiled session's time per name, as the module says: GPU device time or CPU self time."""
    try:
        events = prof.profiler.kineto_results.events()
        return device_times(events) if gpu else self_cpu_times(events)
    except AttributeError:  # a torch whose raw events lack what this reads
        return _from_averages(prof, gpu)


def device_times(events: Iterable[Any]) -> OpTimes:
    """Kernels', copies' and sets' device time per name; GPU-side annotations left out."""
    return _tally(
        (e.name(), e.duration_ns()) for e in events if _device(e) == "CUDA" and "annotation" not in _activity(e)
    )


def self_cpu_times(events: Iterable[Any]) -> OpTimes:
    """CPU ops' and annotations' self time per name: each span less the spans directly nested in it on its thread
    (instant events, such as the ``[memory]`` ones, and asynchronous spans are not spans of a call). As torch's
    averages do, a span whose one nested span has its name (an op recorded twice on its way through the
    dispatcher) counts once, the inner one left out."""
    by_thread: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for e in events:
        if _device(e) != "CPU" or _activity(e) == "cpu_instant_event" or e.is_async() or e.name() == "[memory]":
            continue
        by_thread[e.start_thread_id()].append((e.start_ns(), e.end_ns(), e.name()))
    selves: list[tuple[str, int]] = []  # name, self ns
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))  # a parent before the child that starts with it
        roots: list[list[Any]] = []
        stack: list[list[Any]] = []  # open spans: [start, end, name, spans directly inside]
        for start, end, name in spans:
            while stack and stack[-1][1] <= start:
                stack.pop()
            node = [start, end, name, []]
            (stack[-1][3] if stack else roots).append(node)
            stack.append(node)
        todo = roots
        while todo:
            start, end, name, inside = todo.pop()
            while len(inside) == 1 and inside[0][2] == name:
                inside = inside[0][3]
            selves.append((name, max(end - start - sum(min(c[1], end) - c[0] for c in inside), 0)))
            todo.extend(inside)
    return _tally(selves)


def _tally(spans: Iterable[tuple[str, int]]) -> OpTimes:
    """(name, ns) spans → (name, count, µs) per name, in the order names first appear."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for name, ns in spans:
        t = totals[name]
        t[0] += 1
        t[1] += ns / 1e3
    return [(name, int(n), us) for name, (n, us) in totals.items()]


def _device(event: Any) -> str:
    return getattr(event.device_type(), "name", str(event.device_type()))


def _activity(event: Any) -> str:
    """Kineto's activity type ("cpu_op", "kernel", "gpu_user_annotation", ...); a torch without it (2.11) says
    only whether an event is a user annotation."""
    if hasattr(event, "activity_type"):
        return event.activity_type()
    return "user_annotation" if event.is_user_annotation() else "op"


def _from_averages(prof: Any, gpu: bool) -> OpTimes:
    averages = prof.key_averages()
    if gpu:
        return [
            (e.key, int(e.count), float(e.self_device_time_total))
            for e in averages
            if getattr(e.device_type, "name", "") == "CUDA" and not getattr(e, "is_user_annotation", False)
        ]
    return [(e.key, int(e.count), float(e.self_cpu_time_total)) for e in averages if e.key != "[memory]"]
