"""Helpers for the chapter kernel tests: variant files imported under the Triton interpreter (CPU) or
compiled (on a CUDA GPU, when there is one), and kernels compiled for an H100 (sm_90) without a GPU, as a
real launch would specialise them.

Not a test module (no ``test_`` prefix); the chapter tests import it by name (pytest puts this folder
on ``sys.path``).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from bench.define.protocol import import_file

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"

# Kernels imported at collection are compiled ones unless the whole process runs interpreted.
COMPILED = os.environ.get("TRITON_INTERPRET") != "1"
_compiles = pytest.mark.skipif(not COMPILED, reason="the process runs under TRITON_INTERPRET=1: nothing compiles")


def needs_compiler(test: Any) -> Any:
    """A test that compiles kernels for an H100 (ptxas for sm_90, no GPU needed): seconds each, in the full tier."""
    return pytest.mark.slow(_compiles(test))


MODES = ["interpreter", "cuda"]  # the kernel tests' fixture parameters


@dataclass(frozen=True)
class Kernels:
    """A chapter's variant modules by file stem, and the device their kernels run on."""

    modules: Mapping[str, ModuleType]
    device: torch.device

    def __getitem__(self, stem: str) -> ModuleType:
        return self.modules[stem]

    def same(self, a: torch.Tensor, b: torch.Tensor, rtol: float) -> bool:
        """Bit for bit in the interpreter (numpy runs the same operations in the same order); within ``rtol``
        norm-wise on a GPU, where the compiler may contract or schedule two kernels' arithmetic differently."""
        if self.device.type == "cpu":
            return torch.equal(a, b)
        return float((a.double() - b.double()).norm()) <= rtol * float(b.double().norm())


def variants(chapter: str) -> dict[str, ModuleType]:
    """Every variant file of ``chapter`` by stem, imported in this process's Triton mode."""
    folder = CHAPTERS / chapter
    return {
        p.stem: import_file(p) for p in sorted(folder.glob("baseline_*.py")) + sorted(folder.glob("optimized_*.py"))
    }


def kernel_modes(
    mode: str, chapter: str, commons: tuple[str, ...], compiled: Mapping[str, ModuleType]
) -> Iterator[Kernels]:
    """The body of a chapter's module fixture over MODES: its variants under the interpreter on the CPU, or
    the ``compiled`` ones (imported at collection) on a CUDA GPU, skipped without one."""
    if mode == "cuda":
        if not (COMPILED and torch.cuda.is_available()):
            pytest.skip("needs a CUDA GPU (and compiled kernels)")
        yield Kernels(compiled, torch.device("cuda"))
        return
    with interpreted(chapter, commons) as modules:
        yield Kernels(modules, torch.device("cpu"))


@contextmanager
def interpreted(chapter: str, commons: tuple[str, ...]) -> Iterator[dict[str, ModuleType]]:
    """Every variant file of ``chapter`` (e.g. "ch08") by stem, imported with TRITON_INTERPRET=1 along with
    fresh copies of the ``commons`` modules they import (Triton reads the variable when ``@triton.jit``
    decorates). Copies imported earlier in this process are set aside meanwhile and put back after."""
    saved = {name: sys.modules.pop(name, None) for name in commons}
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITON_INTERPRET", "1")
            for name in commons:
                importlib.import_module(name)
            yield variants(chapter)
    finally:
        for name, module in saved.items():
            sys.modules.pop(name, None)
            if module is not None:
                sys.modules[name] = module


def compile_for_h100(kernel: Any, args: Mapping[str, Any], constexprs: Mapping[str, Any], **options: Any) -> Any:
    """``kernel`` through Triton's front end and ptxas for sm_90, specialised as a launch with ``args``
    would be (types from the values; 16-byte-aligned pointers and multiples of 16 marked divisible, which
    is what lets Triton vectorise loads and pipeline them). ``options``: num_warps, num_stages, ..."""
    pytest.importorskip("triton.backends.nvidia")
    import triton
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], Any] = {}
    for i, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        kind, spec = native_specialize_impl(BaseBackend, args[name], False, True, True)
        if kind == "constexpr":  # Triton specialises an int argument equal to 1 into a constant
            raise ValueError(f"{kernel.__name__}: {name}={args[name]!r} is compiled as a constant; use another")
        signature[name] = kind
        if spec:
            attrs[(i,)] = CUDABackend.parse_attr(spec)
    source = ASTSource(kernel, signature, dict(constexprs), attrs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    assert compiled.asm.get("cubin"), f"{kernel.__name__}: no cubin"
    return compiled


def resources(compiled: Any) -> dict[str, int]:
    """Per-thread registers (REG), spill stack bytes (STACK) and static shared memory of a compiled kernel,
    read from its cubin by the cuobjdump that ships with Triton."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        text = subprocess.run([str(tool), "--dump-resource-usage", f.name], capture_output=True, text=True, check=True)
    for line in text.stdout.splitlines():
        if "REG:" in line:
            fields = dict(item.split(":", 1) for item in line.split() if ":" in item)
            return {k: int(v) for k, v in fields.items() if v.isdigit()}
    raise AssertionError(f"no resource usage in cuobjdump's output: {text.stdout!r}")
