"""Shared fixtures of the chapter tests."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context
from bench.define.protocol import import_file, load_benchmark
from bench.errors import Skip

Compile = Callable[..., bytes]


@pytest.fixture(autouse=True)
def _one_thread(one_intra_op_thread: None) -> None:
    """The chapters' models and references computed here on one intra-op thread (tests/conftest.py)."""


@pytest.fixture
def cpu_smoke() -> Iterator[None]:
    """A CPU smoke-size context for code that calls ``context()`` outside the harness."""
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        yield
    finally:
        set_context(None)


@pytest.fixture(scope="module")
def interpreted(request: pytest.FixtureRequest) -> Iterator[dict[str, ModuleType]]:
    """The test module's chapter (its ``CHAPTER`` directory) imported with TRITON_INTERPRET=1: every variant
    file by stem, and a fresh copy of the chapter's common module as ``"common"`` (CPU kernels).

    Triton reads the variable when ``@triton.jit`` decorates, i.e. at import, so a ``common`` imported
    earlier in this process (compiled-mode kernels) is set aside for the module's tests and put back after.
    """
    chapter: Path = request.module.CHAPTER
    name = f"chapters.{chapter.name}.common"
    saved = sys.modules.pop(name, None)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITON_INTERPRET", "1")
            files = [*chapter.glob("baseline_*.py"), *chapter.glob("optimized_*.py")]
            modules = {p.stem: import_file(p) for p in files}
            modules["common"] = sys.modules[name]
            yield modules
    finally:
        sys.modules.pop(name, None)
        if saved is not None:
            sys.modules[name] = saved


@pytest.fixture
def setup_again(cpu_smoke: None) -> Callable[[Path], None]:
    """``check(path)``: the variant at ``path`` set up, called, torn down, set up again and called: its output
    the same both times. The harness does this to re-check a call from the set-up state, so a teardown that
    loses what ``__init__`` gave, or leaves a file, a mapping or a worker behind, shows here."""

    def outputs(bench: Any) -> list[torch.Tensor]:
        out = bench.get_output()
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def check(path: Path) -> None:
        bench = load_benchmark(path)
        try:
            bench.setup()
        except Skip as exc:  # what this host lacks (a CUDA GPU): the chapter's smoke test says so too
            pytest.skip(str(exc))
        bench.benchmark_fn()
        first = [t.clone() for t in outputs(bench)]
        bench.teardown()
        bench.setup()
        try:
            for out in outputs(bench):
                out.fill_(float("nan") if out.is_floating_point() else -1)  # what the call must overwrite
            bench.benchmark_fn()
            for out, before in zip(outputs(bench), first, strict=True):
                torch.testing.assert_close(out, before, rtol=1e-6, atol=1e-6)
        finally:
            bench.teardown()

    return check


@pytest.fixture
def compile_sm90() -> Compile:
    """``compile_(kernel, signature, constexprs, num_warps=4)``: the kernel's cubin for an H100 (sm_90), built
    without a GPU (Triton's front end and ptxas). The interpreter accepts code the compiler rejects; this
    does not. ``kernel`` must be a compiled-mode JITFunction (decorated without TRITON_INTERPRET=1)."""
    pytest.importorskip("triton.backends.nvidia")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def compile_(kernel: Any, signature: dict[str, str], constexprs: dict[str, Any], num_warps: int = 4) -> bytes:
        if not isinstance(kernel, triton.runtime.JITFunction):  # decorated under TRITON_INTERPRET=1
            pytest.skip(f"{kernel!r} is an interpreter copy: the whole process runs under TRITON_INTERPRET=1")
        full = {name: signature.get(name, "constexpr") for name in kernel.arg_names}
        compiled = triton.compile(ASTSource(kernel, full, constexprs), target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": num_warps})  # fmt: skip
        return bytes(compiled.asm["cubin"])

    return compile_
