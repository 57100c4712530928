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


class NoCall:
    def setup(self) -> None: ...


class Slotted:
    __slots__ = ()

    def setup(self) -> None: ...

    def benchmark_fn(self) -> None: ...


def test_missing_method_named() -> None:
    with pytest.raises(ProtocolError, match=r"x\.py: .*NoCall without callable benchmark_fn"):
        check_benchmark(NoCall(), "x.py")


def test_a_benchmark_without_teardown_gets_one_that_does_nothing() -> None:
    obj = check_benchmark(NoTeardown(), "x.py")
    assert obj.teardown() is None
    with pytest.raises(ProtocolError, match="Slotted has no teardown.*add a teardown"):
        check_benchmark(Slotted(), "x.py")


class SetUpInInit:
    """The way timeit, scripts and most hand-written benchmarks are written: __init__ sets up, __call__ is the work."""

    def __init__(self) -> None:
        import torch

        self.x = torch.arange(4.0)

    def __call__(self):  # noqa: ANN204
        return self.x * 2


class NeedsArguments:
    def __call__(self, x):  # noqa: ANN001, ANN204
        return x


def test_a_callable_is_a_benchmark_whose_call_is_the_work() -> None:
    """get_benchmark() returning a callable (an object with __call__, a function, a lambda) is the benchmark: no
    set-up beyond its own construction, the call timed, its return value the output; its attributes stay its own, so
    the harness sees its tensors (the recheck changes them). A callable that needs arguments is one line naming it."""
    from bench.define.protocol import keep_returned, outputs_of
    from bench.measure.guard import setup_tensors

    obj = check_benchmark(SetUpInInit(), "x.py")
    obj.setup()
    keep_returned(obj, obj.benchmark_fn)()
    assert outputs_of(obj)[0].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert list(setup_tensors(obj)) == ["x"]
    fn = check_benchmark(lambda: 7, "x.py")
    assert fn.benchmark_fn() == 7 and fn.teardown() is None
    with pytest.raises(ProtocolError, match=r"x\.py: .*NeedsArguments, a callable that needs arguments.*'x'"):
        check_benchmark(NeedsArguments(), "x.py")
    with pytest.raises(ProtocolError, match="without callable setup, benchmark_fn"):
        check_benchmark(object(), "x.py")  # not callable: as before


class SetUpAndCall:
    """A class with setup() and __call__, no benchmark_fn: its setup() sets up, its call is the work."""

    def setup(self) -> None:
        import torch

        self.x = torch.arange(3.0)

    def __call__(self):  # noqa: ANN204
        return self.x + 1


def test_an_object_with_setup_and_call_is_a_benchmark_whose_setup_is_its_own() -> None:
    from bench.define.protocol import keep_returned, outputs_of

    obj = check_benchmark(SetUpAndCall(), "x.py")
    obj.setup()
    keep_returned(obj, obj.benchmark_fn)()
    assert outputs_of(obj)[0].tolist() == [1.0, 2.0, 3.0]


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


def test_an_output_made_by_the_call_is_none_before_the_first_call_and_an_error_after_it() -> None:
    from bench.define.protocol import outputs_of

    class Late:
        def get_output(self) -> object:
            return self.y  # type: ignore[attr-defined]  # set by benchmark_fn()

    assert outputs_of(Late(), called=False) is None
    with pytest.raises(ProtocolError, match=r"^get_output\(\) raised AttributeError after benchmark_fn\(\) ran: "
                                            r".*'y'; it must return the output the last call made"):  # fmt: skip
        outputs_of(Late())


def test_a_returned_output_is_the_output_of_a_benchmark_without_get_output() -> None:
    import torch

    from bench.define.protocol import keep_returned, output_style, outputs_of

    class Returns:
        def benchmark_fn(self) -> object:
            return self.result

    obj = Returns()
    fn = keep_returned(obj, obj.benchmark_fn)
    assert output_style(obj) == "returned" and outputs_of(obj, called=False) is None
    obj.result = (torch.ones(2), torch.zeros(3))
    fn()
    assert [t.numel() for t in outputs_of(obj) or []] == [2, 3]
    obj.result = {"not": "a tensor"}
    fn()
    assert outputs_of(obj) is None  # what holds no tensor is no output (the pair is not verified)
    assert outputs_of(obj, called=False) is None  # a new set-up: the last call's output is not this one's


def test_numpy_arrays_dicts_and_none_entries_are_returned_outputs() -> None:
    """What people return besides a tensor: a NumPy array (on its memory, so that the output checks see what the call
    wrote), a dict of outputs, a tuple with a None in it; not a Python number, text or an object array."""
    import numpy as np
    import torch

    from bench.define.protocol import returned_tensors

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    (t,) = returned_tensors(a) or []
    t[0, 0] = 7.0
    assert a[0, 0] == 7.0 and t.dtype == torch.float32  # one memory
    frozen = np.ones(4)
    frozen.flags.writeable = False
    (copy,) = returned_tensors(frozen[::-1]) or []  # read-only and reversed: a copy
    assert copy.tolist() == [1.0] * 4 and copy.dtype == torch.float64
    got = returned_tensors({"out": torch.ones(2), "aux": None, "count": np.int64(3)}) or []
    assert [x.tolist() for x in got] == [[1.0, 1.0], 3]
    assert [x.numel() for x in returned_tensors((torch.zeros(3), None)) or []] == [3]
    for nothing in (1.5, "text", np.array(["a"]), np.array([object()]), (torch.ones(1), 2.0), None, []):
        assert returned_tensors(nothing) is None, nothing


def test_a_chapter_file_nearly_a_benchmark_is_refused_saying_what_to_add(tmp_path) -> None:
    """A chapter file (perflab run, not only perflab ab) of a plain function: its refusal says what to add; a file
    that says nothing more is refused as before."""
    from bench.define.kernelbench import problem_factory
    from bench.define.protocol import import_file
    from bench.errors import ProtocolError

    plain = tmp_path / "baseline_mm.py"
    plain.write_text("def run():\n    return 1\n")
    with pytest.raises(ProtocolError, match=r"add def get_benchmark\(\): return run"):
        problem_factory(import_file(str(plain)), str(plain), None)
    bare = tmp_path / "baseline_x.py"
    bare.write_text("X = 1\n")
    with pytest.raises(ProtocolError, match=r"Model/ModelNew class$"):
        problem_factory(import_file(str(bare)), str(bare), None)
