"""The output is the call's (INTEGRITY #16), whatever the style it is written in: made by the call into a tensor of
its own (``self.y = f(x)``), returned by it, or written into a tensor made in ``setup()``.

The NaN poison (bench.isolate.timed) catches an output the timed calls did not write: the same object as before,
a cached one. Two more looks after the measurement catch work that ran outside the timed call:

* **settled**: the output as it stands NaN-poisoned, one call; once ``benchmark_fn()`` returned (the device
  synchronized) the output no longer changes: a sample of it, taken then and again after the threads the call
  started ended and a moment passed, is the same; and the call left no thread it started running. An output that
  a background thread or a later call finishes changes in between.
* **get_output() does no work**: a call followed by ``get_output()`` takes no longer than a call alone, beyond
  a share of the call (bench.measure.judge.get_output_works: the fastest and the median of interleaved rounds of
  each, and the rounds slower beyond chance, so a busy host's slices do not decide): work deferred to
  ``get_output()`` (the result computed there, a thread joined there) is not timed.

A variant's ranks each take the first look, all at once (its one call is a collective call of every rank), and
rank 0 reports what every rank found (bench.isolate.ranks.produced_merged); the second look, whose rounds stop on
each rank's own clock, is one process's only.

The parent judges what is found (bench.measure.judge).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from bench.define.protocol import outputs_of
from bench.measure.guard import BOUND, subsample
from bench.measure.judge import get_output_works
from bench.measure.outputs import local, whole, writable

# Interleaved rounds (a call alone, a call then get_output()); up to MORE_ROUNDS more while it looks like work.
# Calls slower than SLOW_CALL_MS start with SLOW_ROUNDS.
ROUNDS = 5
MORE_ROUNDS = 10
SLOW_CALL_MS = 50.0
SLOW_ROUNDS = 2
# Rounds that find get_output() doing work are taken again this many times, the last set judged: a busy host's
# scheduler slices that fell on the rounds with get_output() once seldom fall there again; work of its own does.
CONFIRMATIONS = 1
# How long the settle look waits after the call's threads are joined: 10 calls' time, within these bounds (ms).
SETTLE_WAIT_MS = (5.0, 100.0)
# A call that starts threads is looked at up to this many times while each look finds it settled: on a loaded host
# a fake's thread can end before the call has returned (CI: chapter 20's KernelBench attention fake, whose thread
# computes the output after the call, read ok once); a call that waits for its own threads is settled every time.
THREAD_LOOKS = 3
# How long it waits for each thread the call left running (s).
JOIN_S = 10.0


def check_produced(obj: Any, fn: Any, device: Any, median_ms: float, inputs: dict[str, Any],
                   budget_s: float = float("inf"), ranks: bool = False) -> dict[str, Any]:  # fmt: skip
    """Both looks: ``settled`` (bool), ``threads_left`` (threads the call left running), and where the benchmark
    has ``get_output()``, ``get_output_ms`` (its time beyond the call's, fastest against fastest) and
    ``call_ms`` (the fastest call). ``inputs``: the set-up tensors (never poisoned). ``budget_s``: no more rounds
    of get_output() begun past it (the least are always run; the parent judges the rounds there are). ``ranks``:
    one of a variant's ranks (the first look only)."""
    found = _settle(obj, fn, device, median_ms, inputs)
    for _ in range(THREAD_LOOKS - 1 if not ranks else 0):  # a rank's extra calls would hang the others' collectives
        if not found["started"] or not found["settled"] or found["threads_left"]:
            break
        found = _settle(obj, fn, device, median_ms, inputs)
    del found["started"]
    if callable(getattr(obj, "get_output", None)) and not ranks:
        found |= _get_output_cost(obj, fn, device, median_ms, budget_s)
    return found


def _sync(device: Any) -> None:
    if device.type == "cuda":
        BOUND.synchronize(device)


def _sample(obj: Any) -> list[Any]:
    tensors = outputs_of(obj)
    return [t.contiguous() for t in subsample(whole(tensors))] if tensors else []


def _same(a: list[Any], b: list[Any]) -> bool:
    """Bit for bit (a NaN equals itself)."""
    import torch

    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(x.view(torch.uint8), y.view(torch.uint8))
        for x, y in zip(a, b, strict=True)
    )


def _poison(tensors: list[Any] | None, inputs: dict[str, Any]) -> None:
    """NaN into the floating outputs as they stand (as before the measurement), but never into an input."""
    held = {int(t.untyped_storage().data_ptr()) for t in inputs.values()}
    for t in map(local, tensors or []):  # a DTensor: this rank's shard
        if (t.is_floating_point() or t.is_complex()) and int(t.untyped_storage().data_ptr()) not in held:
            with writable(t):
                t.fill_(float("nan"))


@contextlib.contextmanager
def _threads_started() -> Any:
    """The ``threading.Thread`` objects started while the block runs (the call's own, whatever it does with them)."""
    started: list[threading.Thread] = []
    original = threading.Thread.start

    def start(self: threading.Thread, *args: Any, **kwargs: Any) -> None:
        started.append(self)
        original(self, *args, **kwargs)

    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        yield started
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]


def _settle(obj: Any, fn: Any, device: Any, median_ms: float, inputs: dict[str, Any]) -> dict[str, Any]:
    """One call from a poisoned output: sampled once it returned and again after its threads ended and a wait."""
    before = set(threading.enumerate())
    _poison(outputs_of(obj), inputs)
    _sync(device)
    with _threads_started() as by_call:
        fn()
    left = {t for t in by_call if t.is_alive()}  # at once: sampling the output first gave a fast thread time to end
    _sync(device)
    first = _sample(obj)
    started = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    started += [t for t in left if t not in started]
    for t in started:
        t.join(timeout=JOIN_S)
    low, high = SETTLE_WAIT_MS
    BOUND.sleep(min(max(10 * median_ms, low), high) / 1e3)
    _sync(device)
    return {"settled": _same(first, _sample(obj)), "threads_left": len(started), "started": len(by_call)}


def _get_output_cost(obj: Any, fn: Any, device: Any, median_ms: float, budget_s: float) -> dict[str, Any]:
    """Interleaved rounds of a call alone and a call then ``get_output()``: at least ROUNDS (SLOW_ROUNDS for a slow
    call), and up to MORE_ROUNDS more while ``get_output()`` looks like work and ``budget_s`` lasts."""
    get, clock = obj.get_output, BOUND.perf_counter
    t0 = clock()

    def once(with_get: bool) -> float:
        t0 = clock()
        fn()
        if with_get:
            get()
        _sync(device)
        return (clock() - t0) * 1e3

    slow = median_ms > SLOW_CALL_MS
    least, most = (SLOW_ROUNDS, SLOW_ROUNDS + MORE_ROUNDS) if slow else (ROUNDS, ROUNDS + MORE_ROUNDS)
    for _ in range(CONFIRMATIONS + 1):
        alone: list[float] = []
        with_get: list[float] = []
        while len(alone) < most:
            alone.append(once(False))
            with_get.append(once(True))
            if len(alone) >= least and (not get_output_works(alone, with_get) or clock() - t0 > budget_s):
                break
        if not get_output_works(alone, with_get, decide=True) or clock() - t0 > budget_s:
            break
    return {"get_output_ms": min(with_get) - min(alone), "call_ms": min(alone), "alone_ms": alone,
            "with_get_ms": with_get}  # fmt: skip
