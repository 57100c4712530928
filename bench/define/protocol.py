"""The benchmark protocol users write against, and loading a benchmark file.

A chapter file defines a module-level ``get_benchmark()`` (a callable it returns, taking no arguments, is a benchmark
whose call is ``benchmark_fn`` and whose set-up is its construction) returning an object with:

* ``setup()`` — allocate inputs (fresh random data from the seeded generators, never zeros);
* ``benchmark_fn()`` — the work being timed; the harness synchronizes around it;

and optionally:

* ``teardown()`` — release what setup took (without it nothing is released until the process ends, and a set-up
  again replaces what ``setup()`` made);

* ``get_config() -> BenchmarkConfig | None`` — this benchmark's own config layer;
* ``get_output()`` — a tensor or tuple of tensors produced by the *last* ``benchmark_fn`` call,
  compared with the baseline's (no output ⇒ not verified). Any common style is accepted: the call writes into a
  tensor made in ``setup()``, or makes a new one (``self.y = f(x)``: ``get_output()`` may fail until the first
  call), or — without ``get_output()`` — returns it (``return f(x)``, KernelBench's ``forward``). The harness
  checks that the call made it, whatever the style (bench.isolate.produced);
* ``validate_result() -> str | None`` — a message when the result is wrong, None when it is fine;
* ``get_work() -> dict | None`` — ``{"bytes": ..., "flops": ...}`` moved/done per call, the same on both
  sides of a pair; ``"dtype"`` (bf16, fp16, fp8, tf32, fp32) names the matmul peak the FLOPs compete with
  where the first output's dtype does not (fp32 losses of a bf16-autocast step); ``"ceiling"``,
  ``"ceiling_ms"``, ``"ceiling_target_pct"`` state a ceiling the roofline does not know (a PCIe copy, a
  copy engine): its name, the least ms a call can take under it, and the share of it the pair must reach;
* ``get_inputs()`` — the tensors that are this benchmark's inputs (a tensor, a list, a dict); the harness
  changes them to check that the output follows (bench.measure.guard). Without it: every tensor set up in setup();
* ``speedup_metric()`` — what the pair is compared on: "time" (the default); "peak_memory" or "peak_reserved"
  for a pair whose benefit is memory (bench.measure.memory); "quality" (higher is better) or "error" (lower is
  better) for a pair whose benefit is a score it reports (bench.measure.quality); a token-generating
  benchmark's TTFT, TPOT, ... (bench.measure.generation);
* ``metrics() -> dict`` — the scores a quality pair reports of what its timed calls produced: the metric its
  ``speedup_metric()`` names, one number or a list of readings (one per evaluated item).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bench.errors import ProtocolError

REQUIRED = ("setup", "benchmark_fn")
OPTIONAL = ("teardown", "get_config", "get_output", "validate_result", "get_work", "get_inputs", "speedup_metric",
            "metrics")  # fmt: skip


@runtime_checkable
class Benchmark(Protocol):
    def setup(self) -> None: ...

    def benchmark_fn(self) -> Any: ...

    def teardown(self) -> None: ...


def check_benchmark(obj: object, origin: str) -> Benchmark:
    """Return ``obj`` if it follows the protocol, else raise ProtocolError naming what is missing."""
    if obj is None:
        raise ProtocolError(
            f"{origin}: get_benchmark() returned None; it must return the benchmark object (with {', '.join(REQUIRED)})"
        )
    missing = [name for name in REQUIRED if not callable(getattr(obj, name, None))]
    if len(missing) == len(REQUIRED) and callable(obj) and not isinstance(obj, type):
        obj, missing = _called(obj, origin), []
    elif missing == ["benchmark_fn"] and callable(obj) and not isinstance(obj, type):
        obj, missing = _called(obj, origin, setup=obj.setup), []  # type: ignore[attr-defined]  # setup() and __call__
    if missing:
        raise ProtocolError(
            f"{origin}: get_benchmark() returned {type(obj).__name__!s} without callable "
            f"{', '.join(missing)}; a benchmark needs {', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})"
        )
    not_callable = [n for n in OPTIONAL if hasattr(obj, n) and not callable(getattr(obj, n))]
    if not_callable:
        raise ProtocolError(f"{origin}: {', '.join(not_callable)} must be methods, not values")
    if not hasattr(obj, "teardown"):
        try:
            obj.teardown = _nothing_to_release  # type: ignore[attr-defined]
        except AttributeError as exc:  # __slots__ without it
            raise ProtocolError(f"{origin}: {type(obj).__name__} has no teardown() and takes no attribute: "
                                "add a teardown() method (it may do nothing)") from exc  # fmt: skip
    return obj  # type: ignore[return-value]


def _nothing_to_release() -> None:
    """The teardown of a benchmark without one."""


def _nothing_to_set_up() -> None:
    """The set-up of a callable benchmark: its ``__init__`` (or the closure) made its state."""


def _called(obj: Any, origin: str, setup: Callable[[], None] = _nothing_to_set_up) -> Any:
    """A callable ``get_benchmark()`` returned (an object whose ``__init__`` sets up and whose ``__call__`` is the
    work, as ``timeit`` and most scripts write it, or a function): the benchmark whose call is a call of it, its
    return value the output; its state is its own, so the harness still sees its tensors (its attributes). An object
    with a ``setup()`` of its own and ``__call__`` keeps that ``setup()``."""
    import inspect

    try:
        inspect.signature(obj).bind()
    except TypeError as exc:
        raise ProtocolError(
            f"{origin}: get_benchmark() returned {type(obj).__name__}, a callable that needs arguments ({exc}); a "
            f"callable benchmark takes none (its state made in __init__), or define {', '.join(REQUIRED)}"
        ) from exc
    except ValueError:  # a builtin without a signature: let its call say
        pass
    call = obj.__call__
    try:
        obj.setup, obj.benchmark_fn = setup, call
    except AttributeError as exc:  # __slots__, a builtin
        raise ProtocolError(f"{origin}: {type(obj).__name__} is callable but takes no attribute: define "
                            f"{', '.join(REQUIRED)} on it") from exc  # fmt: skip
    return obj


def import_file(path: str | Path) -> Any:
    """Import a benchmark file as a uniquely named module (no sys.path edits)."""
    p = Path(path).resolve()
    name = "perflab_bench_" + "_".join(p.with_suffix("").parts[-2:])
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ProtocolError(f"cannot import {str(p)!r}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_benchmark(path: str | Path) -> Benchmark:
    module = import_file(path)
    factory = benchmark_factory(module)
    if factory is None:
        raise ProtocolError(f"{path}: no module-level get_benchmark() function, nor setup() and benchmark_fn()")
    return check_benchmark(factory(), str(path))


def benchmark_factory(module: Any) -> Callable[[], Any] | None:
    """A file's ``get_benchmark``; for a file of module-level ``setup()`` and ``benchmark_fn()`` (a script's style,
    its state in the module's globals), one returning the module itself; None otherwise."""
    factory = getattr(module, "get_benchmark", None)
    if callable(factory):
        return factory  # type: ignore[no-any-return]
    if all(callable(getattr(module, name, None)) for name in REQUIRED):
        return lambda: module
    return None


# What benchmark_fn() last returned, by benchmark object (id): the output of a benchmark without get_output().
_RETURNED: dict[int, Any] = {}


def keep_returned(obj: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` (a call of ``obj.benchmark_fn``) keeping what it returns as ``obj``'s output, for a benchmark without
    ``get_output()``: its output is what the call returns (``return f(x)``); ``fn`` itself otherwise."""
    if callable(getattr(obj, "get_output", None)):
        return fn
    key = id(obj)

    def call() -> Any:
        out = fn()
        _RETURNED[key] = out
        return out

    return call


def returned_type(obj: Any) -> str | None:
    """The type of what ``benchmark_fn()`` last returned, for a benchmark without ``get_output()`` (``"float"``,
    ``"NoneType"``), or None where it has ``get_output()`` or made no call: what a pair's "no output" names."""
    if callable(getattr(obj, "get_output", None)) or id(obj) not in _RETURNED:
        return None
    return type(_RETURNED[id(obj)]).__name__


def output_style(obj: Any) -> str:
    """Where ``obj``'s output comes from: "get_output" or "returned" (by benchmark_fn())."""
    return "get_output" if callable(getattr(obj, "get_output", None)) else "returned"


def outputs_of(obj: Any, called: bool = True) -> list[Any] | None:
    """The tensors of ``obj``'s output as a list: ``get_output()``'s, or what ``benchmark_fn()`` last returned
    when there is no ``get_output()``; None without an output. ``called`` False: asked before the first call, when
    an output the call makes (``self.y = f(x)``) need not exist yet (None). A ``TypeError`` names what is not a
    tensor in ``get_output()``'s value; a value ``benchmark_fn()`` returned that holds no tensor or array is no output
    (``returned_tensors``)."""
    import torch

    get = getattr(obj, "get_output", None)
    if not callable(get):
        if not called:  # what an earlier set-up's calls returned is not this set-up's
            _RETURNED.pop(id(obj), None)
            return None
        return returned_tensors(_RETURNED.get(id(obj)))
    try:
        out = get()
    except AttributeError as exc:
        if not called:
            return None  # made by the call (self.y = f(x)): none before the first one
        raise ProtocolError(
            f"get_output() raised AttributeError after benchmark_fn() ran: {exc}; it must return the output the "
            "last call made (self.y = f(x) in benchmark_fn(), get_output() returns self.y), or drop get_output() "
            "and return the output from benchmark_fn()"
        ) from exc
    if out is None:
        return None
    tensors = list(out) if isinstance(out, (tuple, list)) else [out]
    bad = [type(t).__name__ for t in tensors if not isinstance(t, torch.Tensor)]
    if bad:
        raise TypeError(f"get_output() must return a tensor or a tuple of tensors, got {bad}")
    return tensors


def returned_tensors(out: Any) -> list[Any] | None:
    """What ``benchmark_fn()`` returned as a list of tensors, or None where it holds none (or something else): a
    tensor, a NumPy array or scalar, or a tuple, list or dict (its values, in order) of them, ``None`` entries left
    out; not a Python number (a training step's ``loss.item()`` would be compared at float64's tolerance). A NumPy
    array becomes a tensor on its memory (the output checks see what the call wrote: ``torch.from_numpy``), copied
    where it cannot be shared (read-only, negative strides)."""
    import torch

    items = list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, (tuple, list)) else [out]
    tensors = []
    for x in (x for x in items if x is not None):
        if isinstance(x, torch.Tensor):
            tensors.append(x)
        elif type(x).__module__ == "numpy":
            t = _from_numpy(x)
            if t is None:
                return None
            tensors.append(t)
        else:
            return None
    return tensors or None


def _from_numpy(x: Any) -> Any:
    """A NumPy array or scalar as a tensor; None for what torch cannot hold (objects, text)."""
    import numpy as np
    import torch

    a = np.asarray(x)
    if a.dtype.kind not in "biufc":
        return None
    if not a.flags.writeable or any(s < 0 for s in a.strides):
        a = np.array(a)  # a copy torch may share
    try:
        return torch.from_numpy(a)
    except (TypeError, ValueError):  # a dtype torch lacks (float128, uint64 on older torch)
        return None


def declared_work(work: Any) -> dict[str, Any]:
    """``get_work()``'s value checked against bench.define.result.Work: its fields, the unset ones left out; a
    ProtocolError naming the bad value otherwise (in one line)."""
    from bench.define.result import Work

    try:
        return Work.model_validate(dict(work)).model_dump(exclude_none=True)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) and errors() else None
        if first is None:
            raise ProtocolError(f"get_work() returned {work!r}: not a dict of work counts ({exc})") from None
        where = ".".join(str(p) for p in first["loc"])
        what = f"{where}={first['input']!r}: " if where else ""
        raise ProtocolError(f"get_work() returned {what}{first['msg'].removeprefix('Value error, ')}") from None
