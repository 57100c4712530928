"""Guards a benchmark cannot talk its way past: clocks bound before its code runs, the tensors it was set
up with watched, its inputs changed to see that its output follows.

* **Bound clocks** (INTEGRITY #12, #13). ``BOUND`` holds the functions the harness times with
  (``time.perf_counter``, ``torch.cuda.Event`` and its methods, ``torch.cuda.synchronize``, the spin
  kernel, ...), captured when this module is imported: in the pre-warmed server or the child's start-up,
  before any benchmark module is imported. Clocks call only these. ``tampered()`` names every one of
  them, and every function of the harness's own measuring modules, that is no longer what was bound:
  checked after set-up and after measurement, a replaced timer makes the variant ``invalid``.
* **Set-up tensors** (INTEGRITY #6). ``setup_tensors(obj)`` finds the tensors reachable from the
  benchmark object after ``setup()`` (attributes, lists, dicts, modules' parameters and buffers; three
  levels deep), minus the outputs. ``fingerprint`` summarises each (a float64 sum and a strided sample,
  so a permutation shows too); a change between set-up and the end of the measurement means the timed
  calls ran on state that earlier calls left behind.
* **Changed inputs** (INTEGRITY #5, #6). ``perturb`` maps every floating value x of the set-up tensors
  to x·(1 + ½·w(x)), w a triangle wave of x (exactly rounded operations only), in place: elementwise, so it
  commutes with any re-layout a variant did in set-up (a transpose, a cast), but not with a result computed
  from the inputs (a cache), and not monotonic, so even sorted or normalised outputs change. Both sides of a
  pair apply the same map to the same values, so their outputs on the changed inputs must still agree.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from types import FunctionType, ModuleType
from typing import Any

from bench.measure.outputs import local, writable

# A strided sample of at most this many elements goes into a tensor's fingerprint.
_SAMPLE = 4096
# perturb() and has_nan() work through floating tensors in chunks of this many elements: their temporaries
# stay at a few MiB (at 16 Mi elements has_nan's bool mask put a 128 MiB variant's peak at 144 MiB).
_CHUNK = 1 << 20


class _Bound:
    """The functions clocks call, as they were before any benchmark code ran."""

    def __init__(self) -> None:
        self.perf_counter = time.perf_counter
        self.monotonic = time.monotonic
        self.sleep = time.sleep
        self.write = os.write
        self._names: dict[str, tuple[Callable[[], Any], Any]] = {
            "time.perf_counter": (lambda: time.perf_counter, self.perf_counter),
            "time.monotonic": (lambda: time.monotonic, self.monotonic),
            "time.sleep": (lambda: time.sleep, self.sleep),
            "os.write": (lambda: os.write, self.write),
        }
        self.torch: ModuleType | None = None
        self.nvml_energy: Callable[..., Any] | None = None  # NVML's energy counter (bench.measure.energy)
        # Streams benchmark code made current while this is a set (``streams_made_current``), as
        # (stream_id, device_index, device_type); None: not recording.
        self.made_current: set[tuple[int, int, int]] | None = None

    def bind_torch(self) -> None:
        """Bind torch's CUDA timing functions (importing torch; the server and the child have it already)."""
        if self.torch is not None:
            return
        import torch

        self.torch = torch
        cuda = torch.cuda
        self.Event = cuda.Event
        self.record = cuda.Event.record
        self.elapsed_time = cuda.Event.elapsed_time
        self.event_synchronize = cuda.Event.synchronize
        self.query = cuda.Event.query
        self.synchronize = cuda.synchronize
        self.spin = cuda._sleep
        self.current_stream = cuda.current_stream
        self.Stream = cuda.Stream
        # Every Python path to a current stream (torch.cuda.stream(), set_stream(), torch.accelerator's)
        # calls one of these; wrapped, they note the streams benchmark code makes current.
        for name in ("_cuda_setStream", "_accelerator_setStream"):
            original = getattr(torch._C, name, None)
            if original is not None:
                wrapper = _recording_set_stream(original)
                setattr(torch._C, name, wrapper)
                self._names[f"torch._C.{name}"] = (lambda n=name: getattr(torch._C, n), wrapper)
        import torch.distributed as dist

        if dist.is_available():  # the ranks' clock meets and agrees through these (bench.measure.collective)
            self.barrier, self.all_gather, self.all_reduce = dist.barrier, dist.all_gather, dist.all_reduce
            self.broadcast = dist.broadcast
            for name in ("barrier", "all_gather", "all_reduce", "broadcast"):
                self._names[f"torch.distributed.{name}"] = (lambda n=name: getattr(dist, n), getattr(self, name))
        for base in cuda.Event.__mro__[1:]:  # the C implementations Event's methods call through super()
            for attr in ("record", "elapsed_time", "synchronize", "query"):
                member = vars(base).get(attr)
                if member is not None:
                    label = f"{base.__module__}.{base.__qualname__}.{attr}"
                    self._names[label] = (lambda b=base, a=attr: vars(b).get(a), member)
        for name, get, value in (
            ("torch.cuda.Event", lambda: torch.cuda.Event, self.Event),
            ("torch.cuda.Event.record", lambda: torch.cuda.Event.record, self.record),
            ("torch.cuda.Event.elapsed_time", lambda: torch.cuda.Event.elapsed_time, self.elapsed_time),
            ("torch.cuda.Event.synchronize", lambda: torch.cuda.Event.synchronize, self.event_synchronize),
            ("torch.cuda.Event.query", lambda: torch.cuda.Event.query, self.query),
            ("torch.cuda.synchronize", lambda: torch.cuda.synchronize, self.synchronize),
            ("torch.cuda._sleep", lambda: torch.cuda._sleep, self.spin),
            ("torch.cuda.current_stream", lambda: torch.cuda.current_stream, self.current_stream),
        ):
            self._names[name] = (get, value)

    def bind_nvml(self) -> None:
        """Bind NVML's energy counter read (nvidia-ml-py), where it is installed."""
        try:
            import pynvml
        except ImportError:
            return
        read = getattr(pynvml, "nvmlDeviceGetTotalEnergyConsumption", None)
        if read is not None:
            self.nvml_energy = read
            self._names["pynvml.nvmlDeviceGetTotalEnergyConsumption"] = (
                lambda: getattr(pynvml, "nvmlDeviceGetTotalEnergyConsumption", None),
                read,
            )

    def bind_module(self, module: ModuleType) -> None:
        """Bind every function and class method defined in ``module`` (the harness's measuring code)."""
        for name, value in list(vars(module).items()):
            if getattr(value, "__module__", None) != module.__name__:
                continue
            if callable(value):
                self._names[f"{module.__name__}.{name}"] = (lambda m=module, n=name: getattr(m, n, None), value)
            if isinstance(value, type):
                for attr, member in list(vars(value).items()):
                    if callable(member):
                        self._names[f"{module.__name__}.{name}.{attr}"] = (
                            lambda c=value, a=attr: vars(c).get(a),
                            member,
                        )

    @contextlib.contextmanager
    def streams_made_current(self) -> Iterator[set[tuple[int, int, int]]]:
        """The streams made current (``torch.cuda.stream(s)``, ``set_stream``) inside the block."""
        seen: set[tuple[int, int, int]] = set()
        self.made_current = seen
        try:
            yield seen
        finally:
            self.made_current = None

    def tampered(self) -> list[str]:
        """Names of bound functions that something has replaced since they were bound."""
        return [name for name, (get, value) in self._names.items() if get() is not value]


def _recording_set_stream(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (torch's set-stream function) that also notes the stream in ``BOUND.made_current``."""

    def set_stream(*args: Any, **kwargs: Any) -> Any:
        seen = BOUND.made_current
        if seen is not None:
            stream = args[0] if args else kwargs.get("stream")
            if stream is not None and hasattr(stream, "stream_id"):  # torch.accelerator: a Stream
                seen.add((int(stream.stream_id), int(stream.device_index), int(stream.device_type)))
            else:  # torch.cuda: stream_id, device_index, device_type
                names = ("stream_id", "device_index", "device_type")
                given = dict(zip(names, args, strict=False)) | {k: v for k, v in kwargs.items() if k in names}
                if len(given) == 3:
                    seen.add((int(given["stream_id"]), int(given["device_index"]), int(given["device_type"])))
        return original(*args, **kwargs)

    return set_stream


BOUND = _Bound()


def bind_harness() -> None:
    """Bind torch's timing functions and the measuring modules' own functions (child start-up)."""
    BOUND.bind_torch()
    BOUND.bind_nvml()
    measuring = ("bench.measure.clocks", "bench.measure.gpu_clocks", "bench.measure.stopping", "bench.measure.guard",
                 "bench.measure.generation", "bench.measure.generation_clock", "bench.measure.collective",
                 "bench.measure.energy", "bench.isolate.child", "bench.isolate.channel", "bench.isolate.timed",
                 "bench.isolate.recheck", "bench.isolate.ranks", "bench.define.context",
                 "bench.define.protocol")  # fmt: skip
    for name in measuring:
        module = sys.modules.get(name)
        if module is not None:
            BOUND.bind_module(module)


def tampered() -> list[str]:
    return BOUND.tampered()


# --- the tensors a benchmark was set up with -------------------------------------------------------


def _tensors(value: Any, path: str, depth: int, seen: set[int]) -> Iterator[tuple[str, Any]]:
    import torch

    if id(value) in seen or depth < 0:
        return
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        yield path, local(value)  # a DTensor's shard: its storage, what this rank holds
    elif type(value).__name__ == "ndarray" and type(value).__module__ == "numpy":
        if value.flags.writeable and value.dtype.kind in "biufc" and all(s >= 0 for s in value.strides):
            yield path, torch.from_numpy(value)  # a NumPy input: changed, fingerprinted on its own memory
    elif isinstance(value, torch.nn.Module):
        for name, t in [*value.named_parameters(), *value.named_buffers()]:
            yield f"{path}.{name}", local(t)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{path}[{key!r}]", depth - 1, seen)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{path}[{i}]", depth - 1, seen)
    elif hasattr(value, "__dict__") and not isinstance(value, (type, ModuleType)) and not callable(value):
        for name, item in vars(value).items():
            yield from _tensors(item, f"{path}.{name}", depth - 1, seen)


def setup_tensors(obj: Any, outputs: list[Any] | None = None, declared: Any = None) -> dict[str, Any]:
    """The tensors (and NumPy arrays, as tensors on their memory) reachable from ``obj``'s attributes (or, when the
    benchmark declares ``get_inputs()``, from what it returned) that share no storage with an output, keyed by the
    path that reaches them first (``x``, ``params[0]``, ``model.fc.weight``); sparse, meta and empty tensors are left
    out."""
    storages = {_storage(t) for t in outputs or []}
    found: dict[str, Any] = {}
    ids: set[int] = set()
    root, prefix = (declared, "get_inputs()") if declared is not None else (obj, "")
    items = _tensors(root, prefix, 4, set()) if declared is not None else (
        pair for name, value in _state(obj) for pair in _tensors(value, name, 3, {id(obj)})
    )  # fmt: skip
    for path, t in items:
        if t.is_sparse or t.is_meta or t.numel() == 0 or _storage(t) in storages or id(t) in ids:
            continue
        ids.add(id(t))
        found[path] = t
    return found


def _state(obj: Any) -> Iterator[tuple[str, Any]]:
    """``obj``'s attributes; for a function (a callable ``get_benchmark()`` returned: ``return run``), also what it
    reads: its closure's variables and the module globals it names (``a``, ``b`` of ``def run(): return a @ b``)."""
    yield from (vars(obj).items() if hasattr(obj, "__dict__") else ())
    if isinstance(obj, FunctionType):
        code = obj.__code__
        for name, cell in zip(code.co_freevars, obj.__closure__ or (), strict=False):
            with contextlib.suppress(ValueError):  # a cell not yet filled
                yield name, cell.cell_contents
        yield from ((name, obj.__globals__[name]) for name in code.co_names if name in obj.__globals__)


def _storage(t: Any) -> int:
    return int(local(t).untyped_storage().data_ptr())


def fingerprint(t: Any) -> tuple[float, str]:
    """A float64 sum of every element (any change of a value) and a hash of a strided sample of at most
    ``_SAMPLE`` elements (a move of values: a sort, a permutation)."""
    import torch

    flat = t.detach()
    total = float(torch.sum(flat, dtype=torch.float64)) if not flat.dtype.is_complex else float(flat.abs().sum())
    if flat.is_contiguous():
        flat = flat.reshape(-1)
        step = max(1, flat.numel() // _SAMPLE)
        sample = flat[::step][:_SAMPLE]
    else:  # a strided view: sample along its first dimension only (no full copy)
        step = max(1, flat.shape[0] // _SAMPLE) if flat.dim() else 1
        sample = flat[::step] if flat.dim() else flat
    data = sample.to("cpu", copy=True).contiguous().view(torch.uint8).numpy().tobytes()
    return total, hashlib.blake2b(data, digest_size=16).hexdigest()


def fingerprints(tensors: dict[str, Any]) -> dict[str, tuple[float, str]]:
    return {key: fingerprint(t) for key, t in tensors.items()}


def changed(before: dict[str, tuple[float, str]], after: dict[str, tuple[float, str]]) -> list[str]:
    """Keys whose fingerprint differs (a NaN sum compares equal to a NaN sum)."""
    out = []
    for key, (total, digest) in before.items():
        if key not in after:
            continue
        total2, digest2 = after[key]
        same_total = total == total2 or (total != total and total2 != total2)
        if not same_total or digest != digest2:
            out.append(key)
    return out


def describe(t: Any) -> str:
    return f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}"


def has_nan(t: Any) -> bool:
    """Whether floating tensor ``t`` holds a NaN: in chunks of ``_CHUNK`` elements (bounded temporaries, none
    billed to the variant's memory worth counting), FP8 widened to fp16 first (torch has no reductions or
    comparisons for FP8 on a GPU)."""
    import torch

    wide = t.element_size() == 1  # float8_e4m3fn, float8_e5m2, ...
    if not t.is_contiguous():
        return bool(torch.isnan(t.to(torch.float16) if wide else t).any())
    flat = t.reshape(-1)
    for start in range(0, flat.numel(), _CHUNK):
        part = flat[start : start + _CHUNK]
        if bool(torch.isnan(part.to(torch.float16) if wide else part).any()):
            return True
    return False


# perturb's wave: its period in x (a sine's of 7x), and the wave itself built from exactly rounded operations.
_WAVE = 7.0 / (2.0 * 3.141592653589793)


def perturb(tensors: dict[str, Any]) -> int:
    """Map every finite floating value x of ``tensors`` to x·(1 + ½·w(x)), in place, w a triangle wave of x's
    period 2π/7 in [-1, 1] through w(0) = 0: w = 4·|frac(x·7/2π + ¼) − ½| − 1; returns how many tensors were
    changed (integer and bool tensors, indices among them, are left as they are).

    Near 0, where a layer's weights lie, w ≈ −4.5·x: a small change that differs from value to value (a weight of
    0.036 moves 8 %), as sin(7x) would give. A wave with its peak at 0 scaled every small weight by ~1.5 alike,
    and the served 12-layer model of chapters 15-17 came out ill-conditioned: the same tokens in two batch shapes
    gave logits up to 4e-2 of their spread apart on an H200 (1e-5 with its own weights), and greedy decoding of a
    correct engine parted from the baseline's.

    Only multiplications, additions, floor and abs, each exactly rounded in IEEE arithmetic: every process, thread
    and vector width computes the same bits, so both sides of a pair change their inputs identically. With
    ``sin`` the second half of a 4096-element tensor came out up to 1.5e-4 apart in 2 of 10 runs of one pair on
    a 2-core CPU (the half computed by torch's other thread), and a pair that agreed failed as a mismatch."""
    import torch

    n = 0
    with torch.no_grad():
        for t in tensors.values():
            if not t.is_floating_point():
                continue
            with writable(t):
                flat = t.view(-1) if t.is_contiguous() else None
                if flat is not None and flat.is_cuda and flat.numel() <= _HOST_WAVE and t.element_size() > 1:
                    host = flat.to("cpu", copy=True)  # copies only: none of the wave's ~10 kernels loaded on the GPU
                    _wave_(host)
                    flat.copy_(host)
                else:
                    parts = [flat[i : i + _CHUNK] for i in range(0, flat.numel(), _CHUNK)] if flat is not None else [t]
                    for part in parts:
                        _wave_(part)
            n += 1
    return n


# A contiguous tensor on a GPU of at most this many elements is changed on the host: a child loads each CUDA kernel
# at its first launch, and the wave's kernels (floor, abs, isfinite, where, ...) are new to most children (the
# H200's recheck of small inputs: 0.03-0.08 s; of int8 inputs, which are left as they are, 0.013 s).
_HOST_WAVE = 1 << 16


def _wave_(part: Any) -> None:
    """``perturb``'s map on ``part``, in place: the same bits on any device (exactly rounded operations only)."""
    import torch

    phase = (part * _WAVE).add_(0.25)
    phase.sub_(torch.floor(phase)).sub_(0.5).abs_().mul_(4.0).sub_(1.0)  # w(x) in [-1, 1]
    factor = phase.mul_(0.5).add_(1.0)
    part.copy_(torch.where(torch.isfinite(part), part * factor, part))


def subsample(tensors: list[Any], limit: int = 1 << 20) -> list[Any]:
    """At most ``limit`` elements of each tensor, strided over its flattened values, on the CPU: enough to
    tell a right output on changed inputs from a cached one, at a fraction of the full outputs' cost."""
    out = []
    for t in tensors:
        flat = t.detach().reshape(-1)
        step = max(1, -(-flat.numel() // limit))
        out.append(flat[::step].to("cpu", copy=True))
    return out
