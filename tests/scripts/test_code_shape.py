"""scripts/code_shape.py: sizes, circles, layers and the public surface, on this repository and on planted trees."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_shape", REPO / "scripts" / "code_shape.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_shape"] = module  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _function(lines: int, marker: str = "") -> str:
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
    return f"def long_one() -> int:{marker}\n{body}    return 0\n"


BASE = {
    "bench/__init__.py": '"""The public face."""\n',
    "bench/errors.py": '"""Errors."""\n',
    "bench/define/__init__.py": '"""define."""\n\nfrom bench.define.a import A\n\n__all__ = ["A"]\n',
    "bench/define/a.py": '"""a."""\n\nA = 1\n',
    "bench/measure/__init__.py": '"""measure."""\n',
    "bench/measure/b.py": '"""b."""\n\nfrom bench.define.a import A\n',
    "analysis/__init__.py": "",
    "analysis/x.py": '"""x."""\n\nfrom bench.define import A\n',
    "chapters/ch01/baseline_y.py": '"""y."""\n\nfrom bench import context\n',
}


def test_this_repository_keeps_its_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert _script().main([]) == 0
    out = capsys.readouterr().out
    assert "Import circles among" in out and ": none" in out and out.rstrip().endswith("ok")


def test_a_clean_planted_tree_passes(tmp_path: Path) -> None:
    assert _script().main([], root=_tree(tmp_path, BASE)) == 0


def test_each_rule_is_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {
        **BASE,
        "bench/define/a.py": '"""a."""\n\nfrom bench.measure.b import B\n\nA = 1\n',  # a later layer, and a circle
        "bench/measure/b.py": '"""b."""\n\nfrom bench.define.a import A\n\nB = A\n' + _function(61),
        "bench/measure/c.py": '"""c."""\n\nimport analysis.x\n',  # bench under the others
        "bench/measure/big.py": '"""big."""\n' + "X = 1\n" * 400,  # 401 lines
        "analysis/x.py": '"""x."""\n\nfrom bench.measure.b import B\n',  # a module inside bench
        "chapters/ch01/baseline_y.py": '"""y."""\n\nfrom bench.define import A\n',  # chapters: bench only
    }
    assert _script().main([], root=_tree(tmp_path, files)) == 1
    err = capsys.readouterr().err
    assert "import circle: bench.define.a <-> bench.measure.b" in err
    assert "bench.define.a (bench.define) imports bench.measure.b (bench.measure), a later layer" in err
    assert "bench/measure/b.py:6 long_one: 61 lines (over 60" in err
    assert "bench/measure/big.py: 401 lines (over 400" in err
    assert "bench imports analysis.x (bench stands under the other packages)" in err
    assert "analysis.x imports bench.measure.b, a module inside bench" in err
    assert "a chapter imports bench.define; chapters import only `bench`" in err


def test_a_comment_that_says_why_lets_a_long_function_or_module_be(tmp_path: Path) -> None:
    files = {
        **BASE,
        "bench/measure/b.py": '"""b."""\n\n# long: one table, read top to bottom\n'
        + "X = 1\n" * 400
        + _function(61, "  # long: the stages in order, as the child runs them"),
    }
    assert _script().main([], root=_tree(tmp_path, files)) == 0


def test_a_name_outside_a_subpackages_all_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {**BASE, "bench/define/a.py": '"""a."""\n\nA = 1\nHIDDEN = 2\n',
             "analysis/x.py": '"""x."""\n\nfrom bench.define import HIDDEN\n'}  # fmt: skip
    assert _script().main([], root=_tree(tmp_path, files)) == 1
    assert "analysis.x imports HIDDEN from bench.define: not in its __all__" in capsys.readouterr().err
