"""What a file that is not (yet) a perflab benchmark holds, read without importing it: another harness's benchmark
(pytest-benchmark, a ``Timer``/``timeit`` statement, Triton's ``do_bench``) or a file nearly written for perflab, and
where its parts go. ``perflab ab`` and a chapter file's child say it where they refuse the file."""

from __future__ import annotations

import ast
from pathlib import Path


def written_for(path: Path) -> str:
    """What another harness's benchmark file holds, and where its parts go in perflab's (read without importing)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test") and "benchmark" in [a.arg for a in n.args.args]:
            return (f"a pytest-benchmark test, {n.name}(benchmark): its code before benchmark(...) goes in setup(), "
                    "the call benchmark(...) times in benchmark_fn(), returning its result")  # fmt: skip
        if not isinstance(n, ast.Call):
            continue
        name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        owner = getattr(n.func.value, "id", "") if isinstance(n.func, ast.Attribute) else ""
        timeit = name == "timeit" or (owner == "timeit" and name == "repeat")  # timeit.timeit, timeit.repeat
        if (name == "Timer" or timeit) and (n.args or any(k.arg == "stmt" for k in n.keywords)):
            return ("a Timer(stmt=...) (torch.utils.benchmark, timeit): its setup and globals go in setup(), its "
                    "stmt in benchmark_fn(), returning its result")  # fmt: skip
        if name in ("do_bench", "do_bench_cudagraph"):
            return (f"a Triton {name}(fn) call: what fn uses goes in setup(), fn's body in benchmark_fn(), returning "
                    "its result")  # fmt: skip
    return made_for_perflab(tree) or "no get_benchmark(), setup() and benchmark_fn(), Model or ModelNew"


def made_for_perflab(tree: ast.Module) -> str | None:
    """What a file nearly written as a perflab benchmark lacks: a class with the call, a function, or module-level
    ``benchmark_fn()`` without ``setup()``."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if "benchmark_fn" in defs and "setup" not in defs:
        return "module-level benchmark_fn() without setup(): add a setup(), which may do nothing"
    for c in (n for n in defs.values() if isinstance(n, ast.ClassDef)):
        methods = {m.name for m in c.body if isinstance(m, ast.FunctionDef)}
        call = "benchmark_fn" if "benchmark_fn" in methods else "__call__" if "__call__" in methods else None
        if call:
            return f"a class {c.name} with {call}() but no get_benchmark(): add def get_benchmark(): return {c.name}()"
    plain = [f.name for f in defs.values() if isinstance(f, ast.FunctionDef) and not f.name.startswith(("_", "test"))
             and not (f.args.args or f.args.posonlyargs or f.args.kwonlyargs)]  # fmt: skip
    if len(plain) == 1:
        return (f"a function {plain[0]}() but no get_benchmark(): add def get_benchmark(): return {plain[0]} (its "
                "call timed, its return value the output)")  # fmt: skip
    return None
