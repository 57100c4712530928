"""bench/define/protocol.py: a benchmark missing part of the protocol is rejected, naming what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.define.protocol import check_benchmark, import_file, load_benchmark
from bench.errors import ProtocolError


class Complete:
    def setup(self) -> None: ...

    def benchmark_fn(self) -> None: ...

    def teardown(self) -> None: ...


class NoTeardown:
    def setup(self) -> None: ...

    def benchmark_fn(self) -> None: ...


class OutputIsAValue(Complete):
    get_output = 3


def test_complete_benchmark_accepted() -> None:
    obj = Complete()
    assert check_benchmark(obj, "x.py") is obj


def test_missing_method_named() -> None:
    with pytest.raises(ProtocolError, match=r"x\.py: .*NoTeardown without callable teardown"):
        check_benchmark(NoTeardown(), "x.py")


def test_optional_hook_must_be_callable() -> None:
    with pytest.raises(ProtocolError, match="get_output must be methods"):
        check_benchmark(OutputIsAValue(), "x.py")


def test_load_benchmark_from_fixture_file(tmp_path: Path, write_benchmark) -> None:
    path = write_benchmark(tmp_path / "ch07" / "baseline_x.py", SCALE=3.0)
    bench = load_benchmark(path)
    assert callable(bench.benchmark_fn)
    assert import_file(path).SCALE == 3.0  # knobs appended to the template apply


def test_same_file_name_in_two_chapters_imports_two_modules(tmp_path: Path, write_benchmark) -> None:
    a = import_file(write_benchmark(tmp_path / "ch01" / "baseline_x.py", SCALE=1.0))
    b = import_file(write_benchmark(tmp_path / "ch02" / "baseline_x.py", SCALE=2.0))
    assert a.__name__ != b.__name__ and (a.SCALE, b.SCALE) == (1.0, 2.0)


def test_load_benchmark_without_factory(tmp_path: Path, write_benchmark) -> None:
    path = write_benchmark(tmp_path / "ch07" / "baseline_x.py", extra="del get_benchmark")
    with pytest.raises(ProtocolError, match="get_benchmark"):
        load_benchmark(path)


def test_an_output_made_only_by_the_timed_call_is_one_line_saying_where_to_make_it() -> None:
    from bench.define.protocol import outputs_of

    class Late:
        def get_output(self) -> object:
            return self.y  # type: ignore[attr-defined]  # set by benchmark_fn(), which has not run yet

    with pytest.raises(ProtocolError, match=r"^get_output\(\) raised AttributeError: .*'y'; the output must exist "
                                            r"once setup\(\) returns"):  # fmt: skip
        outputs_of(Late())
