"""Shared fixtures of the chapter tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Compile = Callable[..., bytes]


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
