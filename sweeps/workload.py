"""Which training job a sweep measures: a built-in by name, or the user's ``module:function`` / ``file.py:function``.

``parse_workload`` runs in the sweep's own process and checks the function can be imported, so a typo is
one line before any trial starts. ``build_workload`` runs inside each trial's process: it calls the
function with the trial's settings and checks what came back. Every failure is a ``WorkloadError`` whose
single line names the workload and what is wrong. One that returned the wrong thing stops the sweep rather
than failing every trial; one whose own code raised (``WorkloadRaised``: ``make`` or its loader factory) may
do so only for some settings — a batch size its model cannot take — so it fails that trial, and the sweep
stops only when every trial so far failed (``sweeps.study``).

A module is imported as Python would from the directory the sweep started in (``my_pkg.train`` next to
where ``perflab`` runs), without editing ``sys.path``: the top-level package is found there by
``PathFinder`` when the normal import cannot see it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.errors import PerflabError
from sweeps.api import TrialSettings, Workload

__all__ = ["WorkloadError", "WorkloadRaised", "WorkloadSpec", "build_workload", "check_batch", "load_function",
           "parse_workload"]  # fmt: skip


class WorkloadError(PerflabError, ValueError):
    """A workload that cannot be imported, raises while being built, or returns the wrong thing."""


class WorkloadRaised(WorkloadError):
    """The workload's own code raised for one trial's settings: that trial fails, not necessarily every one."""


@dataclass(frozen=True)
class WorkloadSpec:
    """A resolved workload: plain strings, so it crosses into the trial's process as JSON."""

    text: str  # as the user wrote it (messages, MLflow, the study's fingerprint)
    kind: str  # "builtin" | "module" | "file"
    target: str  # built-in name, dotted module, or absolute file path
    function: str  # attribute holding make(settings) -> Workload
    root: str = ""  # module: the directory the sweep started in (where the package is looked for)

    @property
    def builtin(self) -> bool:
        return self.kind == "builtin"


def parse_workload(text: str, check: bool = True) -> WorkloadSpec:
    """``text`` → a spec; with ``check``, import the function now (one clear line if that fails)."""
    from sweeps.builtins import BUILTINS

    text = text.strip()
    if text in BUILTINS:
        return WorkloadSpec(text, "builtin", text, "make")
    target, sep, function = text.rpartition(":")
    if not sep or not target or not function.isidentifier():
        raise WorkloadError(
            f"workload {text!r} is neither a built-in ({', '.join(BUILTINS)}) nor 'module:function' / "
            "'path/to/file.py:function' (e.g. my_pkg.train:make)"
        )
    if target.endswith(".py") or os.sep in target:
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise WorkloadError(f"workload {text!r}: file {str(path)!r} does not exist")
        spec = WorkloadSpec(text, "file", str(path), function)
    else:
        spec = WorkloadSpec(text, "module", target, function, root=os.getcwd())
    if check:
        load_function(spec)
    return spec


def _import_module(spec: WorkloadSpec) -> ModuleType:
    """The workload's module, imported with ``sys.argv`` as ``python train.py`` alone would give it: a
    module-level ``parser.parse_args()`` then reads its own defaults, not the sweep's command line."""
    argv = sys.argv
    sys.argv = [spec.target if spec.kind == "file" else spec.target.split(".")[-1]]
    try:
        return _import(spec)
    finally:
        sys.argv = argv


def _import(spec: WorkloadSpec) -> ModuleType:
    if spec.kind == "file":
        digest = hashlib.sha1(spec.target.encode()).hexdigest()[:8]  # two train.py files are two modules
        name = f"perflab_workload_{Path(spec.target).stem}_{digest}"
        if name in sys.modules:
            return sys.modules[name]
        loaded = importlib.util.spec_from_file_location(name, spec.target)
        assert loaded is not None and loaded.loader is not None
        module = importlib.util.module_from_spec(loaded)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        loaded.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(spec.target)
    except ModuleNotFoundError as exc:
        top = spec.target.split(".")[0]
        if exc.name != top or not spec.root:  # found, but something inside it is missing: the user's error
            raise
        found = importlib.machinery.PathFinder.find_spec(top, [spec.root])
        if found is None or found.loader is None:
            raise
        module = importlib.util.module_from_spec(found)
        sys.modules[top] = module
        found.loader.exec_module(module)
        return importlib.import_module(spec.target)


def load_function(spec: WorkloadSpec) -> Any:
    """The workload's ``make`` function; ``WorkloadError`` naming the workload when it cannot be had."""
    if spec.builtin:
        from sweeps.builtins import BUILTINS

        return BUILTINS[spec.target].make
    try:
        module = _import_module(spec)
    except SystemExit as exc:  # argparse's error exit, or sys.exit() at the module's top level
        raise WorkloadError(
            f"workload {spec.text!r} exited while being imported (SystemExit: {exc.code}): the sweep imports it "
            "without command-line arguments; parse them under `if __name__ == '__main__':`, or give every "
            "argument a default (the YAML's workload_args: reach make() as settings.args)"
        ) from None
    except Exception as exc:
        raise WorkloadError(f"workload {spec.text!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, spec.function, None)
    if fn is None:
        public = sorted(n for n in vars(module) if callable(vars(module)[n]) and not n.startswith("_"))
        raise WorkloadError(
            f"workload {spec.text!r}: {spec.target} has no function {spec.function!r} (it has {public[:8]})"
        )
    if not callable(fn):
        raise WorkloadError(f"workload {spec.text!r}: {spec.function!r} is a {type(fn).__name__}, not a function")
    return fn


def build_workload(spec: WorkloadSpec, settings: TrialSettings) -> Workload:
    """Call the workload's function with ``settings`` and check the result (inside a trial's process)."""
    import torch

    fn = load_function(spec)
    try:
        wl = fn(settings)
    except torch.OutOfMemoryError:
        raise  # building the model for this batch/settings ran out of memory: the trial's status is oom
    except Exception as exc:
        hint = ""
        if isinstance(exc, TypeError) and "TrialSettings" in str(exc) and "subscriptable" in str(exc):
            hint = " (settings is a TrialSettings, not a dict: settings.batch_size, settings.args['name'])"
        raise WorkloadRaised(f"workload {spec.text!r} raised {type(exc).__name__}: {exc}{hint}") from exc
    fields = "Workload(model=..., optimizer=..., loss_fn=..., dataset=... or loader=...)"
    if not isinstance(wl, Workload):
        raise WorkloadError(f"workload {spec.text!r} returned {type(wl).__name__}, not sweeps.api.{fields}")
    if not isinstance(wl.model, torch.nn.Module):
        raise WorkloadError(f"workload {spec.text!r}: model is a {type(wl.model).__name__}, not a torch.nn.Module")
    if not isinstance(wl.optimizer, torch.optim.Optimizer):
        raise WorkloadError(
            f"workload {spec.text!r}: optimizer is a {type(wl.optimizer).__name__}, not a torch.optim.Optimizer"
        )
    if not callable(wl.loss_fn):
        raise WorkloadError(f"workload {spec.text!r}: loss_fn is a {type(wl.loss_fn).__name__}, not callable")
    if (wl.dataset is None) == (wl.loader is None):
        raise WorkloadError(f"workload {spec.text!r}: give exactly one of dataset= or loader= (a factory)")
    if wl.loader is not None and not callable(wl.loader):
        raise WorkloadError(f"workload {spec.text!r}: loader must be a function returning the batches")
    params = {id(p) for p in wl.model.parameters()}
    if not any(id(p) in params for g in wl.optimizer.param_groups for p in g["params"]):
        raise WorkloadError(f"workload {spec.text!r}: the optimizer holds none of the model's parameters")
    if wl.dataset is not None:
        _check_dataset(spec.text, wl.dataset)
    return wl


def _check_dataset(text: str, dataset: Any) -> None:
    """A Dataset the sweep's DataLoader can read: a map-style one (``__getitem__`` and ``__len__``: it is
    shuffled by a sampler) or a ``torch.utils.data.IterableDataset`` (a stream, read in its own order)."""
    import torch

    if isinstance(dataset, torch.utils.data.IterableDataset):
        return
    kind = type(dataset).__name__
    if not hasattr(dataset, "__getitem__"):
        way = "subclass torch.utils.data.IterableDataset" if hasattr(dataset, "__iter__") else "give it __getitem__"
        raise WorkloadError(f"workload {text!r}: dataset is a {kind}, neither map-style (__getitem__ and __len__) "
                            f"nor a torch.utils.data.IterableDataset: {way}, or pass loader= (a factory)")  # fmt: skip
    try:
        len(dataset)
    except TypeError:
        raise WorkloadError(f"workload {text!r}: dataset {kind} has __getitem__ but no __len__ (the sweep's "
                            "DataLoader shuffles it by index): give it __len__, or make it a "
                            "torch.utils.data.IterableDataset") from None  # fmt: skip
    if len(dataset) == 0:
        raise WorkloadError(f"workload {text!r}: dataset {kind} is empty (len 0)")


def _shape(obj: Any) -> str:
    import torch

    if isinstance(obj, torch.Tensor):
        return f"Tensor{tuple(obj.shape)}"
    if isinstance(obj, tuple | list):
        items = ", ".join(_shape(o) for o in obj[:4]) + (", ..." if len(obj) > 4 else "")
        return f"{type(obj).__name__} of {len(obj)}: ({items})"
    if isinstance(obj, dict):
        return f"dict with keys {sorted(map(str, obj))[:6]}"
    return type(obj).__name__


def _dims(obj: Any) -> set[int]:
    import torch

    if isinstance(obj, torch.Tensor):
        return set(obj.shape)
    if isinstance(obj, tuple | list):
        return set().union(*(_dims(o) for o in obj)) if obj else set()
    if isinstance(obj, dict):
        return set().union(*(_dims(o) for o in obj.values())) if obj else set()
    return set()


def check_batch(text: str, batch: Any, micro_batch_size: int) -> None:
    """The first micro-batch: an ``(inputs, target)`` pair holding ``micro_batch_size`` samples, or one
    ``WorkloadError`` line saying what came instead (the sweep's samples/s count that many per micro-batch)."""
    if not isinstance(batch, tuple | list) or len(batch) != 2:
        raise WorkloadError(
            f"workload {text!r}: a batch is a {_shape(batch)}; the sweep needs (inputs, target) pairs "
            "(inputs: a tensor, a tuple for model(*inputs) or a dict for model(**inputs); target: what loss_fn "
            "takes): return that from the Dataset's items or the collate_fn"
        )
    if not _dims(batch):
        raise WorkloadError(f"workload {text!r}: a batch holds no tensor ({_shape(batch)}): the Dataset's items "
                            "or the collate_fn must give tensors")  # fmt: skip
    if micro_batch_size not in _dims(batch):
        raise WorkloadError(
            f"workload {text!r}: the first batch ({_shape(batch)}) has no dimension of {micro_batch_size}, the "
            "trial's micro-batch size: build the loader with batch_size=settings.micro_batch_size "
            "(settings.dataloader(dataset) does)"
        )
