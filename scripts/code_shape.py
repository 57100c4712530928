"""The shape of the code, checked: module sizes, the longest functions, import circles and the import rules.

    python3 scripts/code_shape.py [--top N]

Prints the largest modules and the longest functions of the project's packages, then checks, and exits 1 when
any check fails (CI runs it before the tests, ``.ci/run``):

* **Sizes** (the harness, ``bench/`` and ``perflab/``): a module of more than ``MODULE_LINES`` lines or a
  function of more than ``FUNCTION_LINES`` needs a comment that says why, ``# long: <why>``: for a function on
  its ``def`` line or on the comment lines right above it (above its decorators); for a module among the
  comment lines before its first statement after the docstring. The other packages are listed, not judged.
* **No import circles** among the project's modules (every ``import`` counts, those inside functions too).
* **Layers**: a module of a ``bench`` subpackage imports only from its own subpackage and from those before it in
  ``LAYERS``; ``bench`` imports nothing from ``perflab``, ``analysis``, ``sweeps``, ``kernels``, ``models`` or
  ``chapters`` (they stand on it, not under it).
* **Public surface**: chapters import only ``bench``; ``analysis``, ``sweeps`` and ``kernels`` import ``bench``,
  ``bench.errors`` and the names a ``bench`` subpackage lists in its ``__all__``, never a module inside one.

Only the standard library (``ast``): it reads the files, it imports nothing.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "perflab", "analysis", "sweeps", "kernels", "models", "chapters")
JUDGED = ("bench", "perflab")  # the packages whose sizes are limits, not information
MODULE_LINES = 400
FUNCTION_LINES = 60
MARKER = "# long:"
# bench's subpackages in dependency order: each imports only from itself and those before it.
LAYERS = ("bench.errors", "bench.define", "bench.measure", "bench.profile", "bench.isolate", "bench.record",
          "bench.audit", "bench.cli")  # fmt: skip
BUILT_ON_BENCH = ("analysis", "sweeps", "kernels")  # public surface only
CHAPTERS = ("chapters",)  # the top-level package alone


@dataclass
class Module:
    name: str
    path: Path
    lines: int
    tree: ast.Module
    source: list[str]
    imports: list[tuple[str, list[str], int]] = field(default_factory=list)  # (module, names imported, line)

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def load(root: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for top in PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            text = path.read_text()
            modules[name] = Module(name, path, len(text.splitlines()), ast.parse(text, str(path)), text.splitlines())
    for m in modules.values():
        m.imports = list(_imports(m))
    return modules


def _imports(m: Module) -> Iterator[tuple[str, list[str], int]]:
    package = m.name if m.is_package else m.name.rpartition(".")[0]
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base, [a.name for a in node.names], node.lineno


def targets(modules: dict[str, Module], module: str, names: list[str]) -> list[str]:
    """The project's modules an import statement loads: ``from a.b import c`` is ``a.b.c`` when that is a module,
    else ``a.b``; ``import a.b.c`` the longest prefix that is one of ours."""
    found = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
    if len(found) < len(names) or not names:
        parts = module.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in modules:
                found.append(".".join(parts[:i]))
                break
    return found


def graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    return {
        m.name: {t for module, names, _ in m.imports for t in targets(modules, module, names) if t != m.name}
        for m in modules.values()
    }


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _marked(source: list[str], line: int) -> bool:
    """A ``# long:`` comment on line ``line`` (1-based) or on the comment and decorator lines right above it."""
    if MARKER in source[line - 1]:
        return True
    i = line - 2
    while i >= 0 and source[i].strip().startswith(("#", "@")):
        if source[i].strip().startswith(MARKER):
            return True
        i -= 1
    return False


def _module_marked(m: Module) -> bool:
    body = m.tree.body
    start = body[0].end_lineno if body and isinstance(body[0], ast.Expr) else 0  # after the docstring
    first = next((n.lineno for n in body if not isinstance(n, ast.Expr)), len(m.source) + 1)
    return any(line.startswith(MARKER) for line in m.source[start or 0 : first - 1])


def functions(m: Module) -> Iterator[tuple[str, int, int, bool]]:
    """(qualified name, lines, first line, marked) of every function and method."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                yield name, child.end_lineno - child.lineno + 1, child.lineno, _marked(m.source, child.lineno)
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(m.tree, "")


def _layer(name: str) -> int | None:
    for i, layer in enumerate(LAYERS):
        if name == layer or name.startswith(layer + "."):
            return i
    return None


def _public(modules: dict[str, Module], package: str) -> set[str]:
    """The names in a package's ``__all__``."""
    m = modules.get(package)
    for node in m.tree.body if m else []:
        targets_ = node.targets if isinstance(node, ast.Assign) else []
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets_):
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List | ast.Tuple):
            return {ast.literal_eval(e) for e in node.value.elts}
    return set()


def rule_breaks(modules: dict[str, Module], root: Path) -> list[str]:
    """Every import that breaks the layers or the public surface, as "path:line: what"."""
    out = []
    for m in modules.values():
        top = m.name.split(".")[0]
        for module, names, line in m.imports:
            where = f"{m.path.relative_to(root)}:{line}"
            if top == "bench":
                out += _bench_import(m.name, module, where)
            elif top in CHAPTERS and module.startswith("bench") and module != "bench":
                out.append(f"{where}: a chapter imports {module}; chapters import only `bench`")
            elif top in BUILT_ON_BENCH and module.startswith("bench.") and module != "bench.errors":
                if module.count(".") > 1 or module not in modules or not modules[module].is_package:
                    out.append(f"{where}: {m.name} imports {module}, a module inside bench; use its package's __all__")
                    continue
                hidden = sorted(set(names) - _public(modules, module))
                if hidden or not names:
                    what = ", ".join(hidden) or module
                    out.append(f"{where}: {m.name} imports {what} from {module}: not in its __all__")
    return out


def _bench_import(name: str, module: str, where: str) -> list[str]:
    if module.split(".")[0] in PACKAGES and module.split(".")[0] != "bench":
        return [f"{where}: bench imports {module} (bench stands under the other packages)"]
    if module == "bench" and name != "bench":
        return [f"{where}: {name} imports from bench's public face; import the module itself"]
    mine, theirs = _layer(name), _layer(module)
    if mine is not None and theirs is not None and theirs > mine:
        return [f"{where}: {name} ({LAYERS[mine]}) imports {module} ({LAYERS[theirs]}), a later layer"]
    return []


def _sizes(modules: dict[str, Module], root: Path, top: int) -> list[str]:
    """Print the packages' sizes, the largest modules and the longest functions; return the problems."""
    totals: dict[str, list[int]] = {}
    for m in modules.values():
        parts = m.name.split(".")
        sub = ".".join(parts[:2])
        key = sub if parts[0] == "bench" and sub in modules and modules[sub].is_package else parts[0]
        totals.setdefault(key, [0, 0])
        totals[key][0] += 1
        totals[key][1] += m.lines
    print("Lines of Python (modules):")
    for name, (count, lines) in sorted(totals.items()):
        print(f"  {lines:6d} ({count:3d})  {name.replace('.', '/')}{'/' if name != 'bench' else '/*.py'}")
    judged = [m for m in modules.values() if m.name.split(".")[0] in JUDGED]
    print(f"\nLargest modules of {' and '.join(JUDGED)} (limit {MODULE_LINES} lines without `{MARKER} <why>`):")
    for m in sorted(judged, key=lambda m: -m.lines)[:top]:
        print(f"  {m.lines:5d}  {m.path.relative_to(root)}" + ("  (marked long)" if _module_marked(m) else ""))
    problems = [f"{m.path.relative_to(root)}: {m.lines} lines (over {MODULE_LINES}, no `{MARKER}` comment)"
                for m in judged if m.lines > MODULE_LINES and not _module_marked(m)]  # fmt: skip
    rows = [(m, *f) for m in judged for f in functions(m)]
    print(f"\nLongest functions of {' and '.join(JUDGED)} (limit {FUNCTION_LINES} lines without `{MARKER} <why>`):")
    for m, name, lines, line, marked in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {lines:5d}  {m.path.relative_to(root)}:{line} {name}" + ("  (marked long)" if marked else ""))
    problems += [f"{m.path.relative_to(root)}:{line} {name}: {lines} lines (over {FUNCTION_LINES}, no `{MARKER}`)"
                 for m, name, lines, line, marked in rows if lines > FUNCTION_LINES and not marked]  # fmt: skip
    others = [m for m in modules.values() if m.name.split(".")[0] not in JUDGED and m.lines > MODULE_LINES]
    long_others = [f for m in modules.values() if m.name.split(".")[0] not in JUDGED for f in functions(m)]
    print(f"\nOther packages (listed, not judged): {len(others)} module(s) over {MODULE_LINES} lines"
          + "".join(f"; {m.path.relative_to(root)} {m.lines}" for m in others)
          + f"; {sum(f[1] > FUNCTION_LINES for f in long_others)} function(s) over {FUNCTION_LINES} lines")  # fmt: skip
    return problems


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=12, help="modules and functions listed (default 12)")
    args = parser.parse_args(argv)
    modules = load(root)
    problems = _sizes(modules, root, args.top)
    found = circles(graph(modules))
    print(f"\nImport circles among {len(modules)} modules: {len(found) or 'none'}")
    for component in found:
        print("  " + " <-> ".join(component))
    problems += [f"import circle: {' <-> '.join(c)}" for c in found]
    breaks = rule_breaks(modules, root)
    upward = [b for b in breaks if "bench stands under" in b]
    print(f"\nbench importing perflab, analysis, sweeps, kernels, models or chapters: {len(upward) or 'none'}")
    print(f"Layers ({' < '.join(LAYERS)}) and the public surface: {len(breaks) - len(upward) or 'kept'}")
    problems += breaks
    if problems:
        print(f"\n{len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print("\nok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
