"""KernelBench-format problems as benchmarks: a reference file defining ``Model``, ``get_inputs()`` and (optionally)
``get_init_inputs()``, and candidate files defining ``ModelNew``, timed through the same harness as any pair
(``perflab ab``): every check applies, since these are where leaderboards met the exploits.

As KernelBench builds them: the seed set before each model is made (so a candidate that creates the same layers in
the same order holds the same weights) and before the inputs are drawn; both sides take the reference's
``get_inputs()`` and ``get_init_inputs()``, moved to the run's device; the call is ``model(*inputs)`` under
``torch.no_grad()``, its return value the output (bench.define.protocol: the returning style). The model stays in
the mode its file leaves it in. The inputs the harness changes to see the output follow are the tensors
``get_inputs()`` gave, not the weights: a candidate may fold or re-lay weights at construction.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from bench.define.context import context
from bench.define.protocol import REQUIRED
from bench.errors import ProtocolError

Kind = Literal["benchmark", "reference", "candidate"]


def file_kind(path: str | Path) -> Kind | None:
    """What a Python file is, read without importing it: a benchmark (``get_benchmark()``, or module-level ``setup()``
    and ``benchmark_fn()``), a KernelBench reference
    (``Model`` and ``get_inputs()``, no ``ModelNew``) or candidate (``ModelNew``); None for anything else. A
    ``SyntaxError`` names the file and line."""
    p = Path(path)
    tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if "get_benchmark" in names or set(REQUIRED) <= names:  # a module of functions is one too (protocol's rule)
        return "benchmark"
    if "ModelNew" in names:
        return "candidate"
    if "Model" in names and "get_inputs" in names:
        return "reference"
    return None


class Problem:
    """A KernelBench model (``Model`` or ``ModelNew``) and the reference's inputs, as a benchmark."""

    def __init__(self, model_class: type, problem: Any) -> None:
        self.model_class = model_class
        self.problem = problem  # the reference's module: get_inputs(), get_init_inputs()

    def setup(self) -> None:
        import torch

        ctx = context()
        get_init = getattr(self.problem, "get_init_inputs", None)
        init = list(get_init()) if callable(get_init) else []
        torch.manual_seed(ctx.seed)
        self.model = self.model_class(*init).to(ctx.device)
        torch.manual_seed(ctx.seed)
        self.inputs = [x.to(ctx.device) if isinstance(x, torch.Tensor) else x for x in self.problem.get_inputs()]

    def benchmark_fn(self) -> Any:
        import torch

        with torch.no_grad():
            return self.model(*self.inputs)

    def teardown(self) -> None:
        del self.model, self.inputs

    def get_inputs(self) -> list[Any]:
        import torch

        return [x for x in self.inputs if isinstance(x, torch.Tensor)]


def problem_factory(module: Any, path: str, reference: str | None) -> Callable[[], Problem]:
    """The benchmark of a KernelBench-format ``module`` (its file ``path``): ``ModelNew`` with ``reference``'s inputs,
    or ``Model`` with its own; a ``ProtocolError`` naming what is missing."""
    from bench.define.protocol import import_file

    model = getattr(module, "ModelNew", None) or getattr(module, "Model", None)
    if not isinstance(model, type):
        raise ProtocolError(f"{path}: no module-level get_benchmark() function, nor setup() and benchmark_fn(), nor a "
                            f"KernelBench Model/ModelNew class{_hint(path)}")  # fmt: skip
    problem = import_file(reference) if reference and Path(reference).resolve() != Path(path).resolve() else module
    if not callable(getattr(problem, "get_inputs", None)):
        where = reference or path
        raise ProtocolError(f"{where}: a KernelBench problem needs get_inputs() (and get_init_inputs() for the model)")
    return lambda: Problem(model, problem)


def _hint(path: str) -> str:
    """What the file looks like instead, where that says more than what it lacks (bench.define.hints)."""
    from bench.define.hints import written_for

    try:
        said = written_for(Path(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ""
    return "" if said.startswith("no get_benchmark()") else f": {said}"
