"""bench.define.interpreter: an older Triton interpreter's ``__index__`` (``int(data)``, which numpy 2.4 refuses for a
one-element array of one dimension) replaced by one that squeezes, per launch, after the interpreter's own patch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


# The chapters' pattern (ch14, ch18: ``range(0, pid * BLOCK, STEP)``), then each case of ``shift``: kernels under
# TRITON_INTERPRET=1 in a fresh process, as a harness child on a CPU runs them, each case's outcome as JSON (an
# exception's traceback as the process would have printed it). One process for all: each paid torch's and Triton's
# imports again (~5 s of CPU on the 2-core host).
SCRIPT = """
import json, sys, traceback, torch, triton, triton.language as tl
from bench.define import interpreter
interpreter.mend()

@triton.jit
def count(Out, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    total = 0
    for _ in range(0, pid * BLOCK, 2):
        total += 1
    tl.store(Out + pid, total)

@triton.jit
def shift(X, Y, n, SHIFT: tl.constexpr, OVER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n + OVER
    tl.store(Y + offs, tl.load(X + offs + SHIFT, mask=keep & (offs + SHIFT < n + OVER)), mask=keep)

out = torch.zeros(4, dtype=torch.int32)
count[(4,)](out, BLOCK=4)
print(json.dumps({"case": "causal", "out": out.tolist()}), flush=True)
for case in json.loads(sys.argv[1]):
    x, y = torch.arange(100, dtype=torch.float32), torch.zeros(100)
    try:
        shift[(4,)](x, y, 100, SHIFT=case[0], OVER=case[1], BLOCK=32)
    except Exception as exc:
        done = {"raised": type(exc).__name__, "stderr": traceback.format_exc()}
    else:
        done = {"sum": int(y.sum())}
    print(json.dumps({"case": case, **done}), flush=True)
"""

BOUNDS = [
    (0, 0, None),  # the usual masked tail: the pointers past the end are formed, never used
    (0, 3, "a 4-byte load at 0x"),  # a mask one too wide reads 3 floats past x: caught before the read
    (-2, 0, "8 bytes before X (float32[100], 400 bytes)"),  # an offset before the tensor
]


@pytest.fixture(scope="module")
def interpreted_run(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, dict[str, Any]]:
    """SCRIPT run once in a fresh interpreting process: each case's outcome by case (``"causal"``, (shift, over))."""
    script = tmp_path_factory.mktemp("interpreted") / "kernels.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    cases = [[shift, over] for shift, over, _ in BOUNDS]
    done = subprocess.run([sys.executable, str(script), json.dumps(cases)], capture_output=True, text=True,
                          env=env, timeout=180)  # fmt: skip
    # every case's exception caught and printed: a non-zero status is a signal (the host's memory touched: without
    # the check a store 12 bytes past ``y`` aborted the process at its next garbage collection) or a failure
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {c["case"] if c["case"] == "causal" else tuple(c["case"]): c for c in found}


def test_a_causal_loop_over_a_program_id_runs_interpreted(interpreted_run: dict[Any, dict[str, Any]]) -> None:
    """The chapters' pattern (ch14, ch18: ``range(0, pid * BLOCK, STEP)``) under TRITON_INTERPRET=1 in a fresh
    process, as a harness child on a CPU runs it."""
    assert interpreted_run["causal"]["out"] == [0, 2, 4, 6]


@pytest.mark.parametrize(("shift", "over", "found"), BOUNDS)
def test_an_interpreted_kernel_touches_only_its_launchs_tensors(interpreted_run: dict[Any, dict[str, Any]],
                                                                 shift: int, over: int,
                                                                 found: str | None) -> None:  # fmt: skip
    """An access outside every tensor of the launch is refused, named, before it is made. Made, it reads or writes
    the host's memory wherever that is: without the check a store 12 bytes past ``y`` aborted this process at its
    next garbage collection ("double free or corruption"), a test's worker with it."""
    done = interpreted_run[(shift, over)]
    if found is None:
        assert done.get("sum") == 4950, done
        return
    assert "raised" in done, done  # an exception, not a signal
    assert "OutOfBounds" in done["stderr"] and "kernel 'shift', program (" in done["stderr"], done["stderr"][-2000:]
    assert found in done["stderr"], done["stderr"][-2000:]


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
        interpreter._check(
            "load",
            SimpleNamespace(grid_idx=(1, 0, 0)),
            SimpleNamespace(data=ptrs.data, get_element_ty=ptrs.get_element_ty),
            SimpleNamespace(data=np.array([True, False])),
        )
    finally:
        state.memory = None
