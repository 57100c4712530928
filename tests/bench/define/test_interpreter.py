"""bench.define.interpreter: an older Triton interpreter's ``__index__`` (``int(data)``, which numpy 2.4 refuses for a
one-element array of one dimension) replaced by one that squeezes, per launch, after the interpreter's own patch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")
import triton.runtime.interpreter as triton_interpreter  # noqa: E402

from bench.define import interpreter  # noqa: E402


class Tensor:
    def __init__(self, data: np.ndarray) -> None:
        self.handle = SimpleNamespace(data=data)


def old_patch(tensor: Any, scope: Any = None) -> None:
    """Triton 3.6's patch of ``tl.tensor``, as far as ``__index__`` goes."""
    tensor.__index__ = lambda self: int(self.handle.data)


def test_an_old_interpreters_index_is_mended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton_interpreter, "_patch_lang_tensor", old_patch)
    cls = type("T", (Tensor,), {})
    triton_interpreter._patch_lang_tensor(cls, None)
    if np.lib.NumpyVersion(np.__version__) >= "2.4.0":  # the failure being mended, where this numpy shows it
        with pytest.raises(TypeError):
            range(cls(np.array([3], dtype=np.int32)))  # type: ignore[call-overload]
    assert interpreter.mend() is True
    assert interpreter.mend() is False  # once
    cls = type("T", (Tensor,), {})
    triton_interpreter._patch_lang_tensor(cls, None)
    assert list(range(0, cls(np.array([3], dtype=np.int32)), 1)) == [0, 1, 2]  # type: ignore[call-overload]
    assert list(range(cls(np.array(2, dtype=np.int64)))) == [0, 1]  # type: ignore[call-overload]


def test_a_causal_loop_over_a_program_id_runs_interpreted(tmp_path: Any) -> None:
    """The chapters' pattern (ch14, ch18: ``range(0, pid * BLOCK, STEP)``) under TRITON_INTERPRET=1 in a fresh
    process, as a harness child on a CPU runs it."""
    script = tmp_path / "causal.py"
    script.write_text(
        textwrap.dedent("""
        import torch, triton, triton.language as tl
        from bench.define import interpreter
        interpreter.mend()

        @triton.jit
        def count(Out, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            total = 0
            for _ in range(0, pid * BLOCK, 2):
                total += 1
            tl.store(Out + pid, total)

        out = torch.zeros(4, dtype=torch.int32)
        count[(4,)](out, BLOCK=4)
        print(out.tolist())
    """)
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-4:] == ["[0,", "2,", "4,", "6]"]


BOUNDS = """
import sys, torch, triton, triton.language as tl
from bench.define import interpreter
interpreter.mend()

@triton.jit
def shift(X, Y, n, SHIFT: tl.constexpr, OVER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n + OVER
    tl.store(Y + offs, tl.load(X + offs + SHIFT, mask=keep & (offs + SHIFT < n + OVER)), mask=keep)

x, y = torch.arange(100, dtype=torch.float32), torch.zeros(100)
shift[(4,)](x, y, 100, SHIFT=int(sys.argv[1]), OVER=int(sys.argv[2]), BLOCK=32)
print("sum", int(y.sum()))
"""


@pytest.mark.parametrize(("shift", "over", "found"), [
    (0, 0, None),  # the usual masked tail: the pointers past the end are formed, never used
    (0, 3, "a 4-byte load at 0x"),  # a mask one too wide reads 3 floats past x: caught before the read
    (-2, 0, "8 bytes before X (float32[100], 400 bytes)"),  # an offset before the tensor
])  # fmt: skip
def test_an_interpreted_kernel_touches_only_its_launchs_tensors(tmp_path: Any, shift: int, over: int,
                                                                 found: str | None) -> None:  # fmt: skip
    """An access outside every tensor of the launch is refused, named, before it is made. Made, it reads or writes
    the host's memory wherever that is: without the check a store 12 bytes past ``y`` aborted this process at its
    next garbage collection ("double free or corruption"), a test's worker with it."""
    script = tmp_path / "bounds.py"
    script.write_text(BOUNDS)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    done = subprocess.run([sys.executable, str(script), str(shift), str(over)], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    if found is None:
        assert done.returncode == 0 and "sum 4950" in done.stdout, done.stderr[-2000:]
        return
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])  # an exception, not a signal
    assert "OutOfBounds" in done.stderr and "kernel 'shift', program (" in done.stderr, done.stderr[-2000:]
    assert found in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize(("address", "where"), [
    (0x5000 - 8, "8 bytes before X"),  # nearer X's start above it than Y's end below it
    (0x1400 + 4, "8 bytes past the end of Y"),  # the 4-byte element ends 8 bytes past Y
    (0x800, "2048 bytes before Y"),  # below every tensor
    (0x6000, "3076 bytes past the end of X"),  # above every tensor (the element ends 3,076 bytes past)
])  # fmt: skip
def test_an_access_outside_is_placed_against_the_nearest_tensor(address: int, where: str) -> None:
    import triton.language as tl

    memory = [(0x1000, 0x1400, "Y"), (0x5000, 0x5400, "X")]  # as a launch notes them: sorted by start
    state = interpreter._launch
    state.kernel, state.memory = "k", memory
    state.starts, state.ends = (np.array([m[i] for m in memory], dtype=np.uint64) for i in (0, 1))
    ptrs = SimpleNamespace(data=np.array([0x1000, address], dtype=np.uint64), get_element_ty=lambda: tl.float32)
    try:
        with pytest.raises(interpreter.OutOfBounds, match=rf"program \(1, 0, 0\): a 4-byte load .*: {where}$"):
            interpreter._check("load", SimpleNamespace(grid_idx=(1, 0, 0)), ptrs, None)
        interpreter._check("load", SimpleNamespace(grid_idx=(1, 0, 0)), SimpleNamespace(
            data=ptrs.data, get_element_ty=ptrs.get_element_ty), SimpleNamespace(data=np.array([True, False])))
    finally:
        state.memory = None
