"""Which training job a sweep measures: a built-in by name, or the user's ``module:function`` / ``file.py:function``.

``parse_workload`` runs in the sweep's own process and checks the function can be imported, so a typo is
one line before any trial starts. ``build_workload`` runs inside each trial's process: it calls the
function with the trial's settings and checks what came back. Every failure is a ``WorkloadError`` whose
single line names the workload and what is wrong; the sweep stops on it rather than failing every trial.

A module is imported as Python would from the directory the sweep started in (``my_pkg.train`` next to
where ``perflab`` runs), without editing ``sys.path``: the top-level package is found there by
``PathFinder`` when the normal import cannot see it.
"""

from __future__ import annotations

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

__all__ = ["WorkloadError", "WorkloadSpec", "build_workload", "load_function", "parse_workload"]


class WorkloadError(PerflabError, ValueError):
    """A workload that cannot be imported, raises while being built, or returns the wrong thing."""


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
    if spec.kind == "file":
        name = f"perflab_workload_{Path(spec.target).stem}"
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
        raise WorkloadError(f"workload {spec.text!r} raised {type(exc).__name__}: {exc}") from None
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
    return wl
