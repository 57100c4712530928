"""Kernel cases on the CPU: the Triton kernels run through the interpreter."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

KERNELS = "kernels.rmsnorm"


@pytest.fixture(scope="session")
def interp() -> Iterator[ModuleType]:
    """kernels.rmsnorm imported fresh with TRITON_INTERPRET=1 (read when ``@triton.jit`` decorates).

    A copy imported earlier in this process is set aside for these tests and put back after.
    """
    import importlib

    saved = sys.modules.pop(KERNELS, None)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITON_INTERPRET", "1")
            yield importlib.import_module(KERNELS)
    finally:
        sys.modules.pop(KERNELS, None)
        if saved is not None:
            sys.modules[KERNELS] = saved
