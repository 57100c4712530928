"""Kernel cases on the CPU: the Triton kernels run through the interpreter."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.kernels.cli_run import KernelsRun, run_kernels

# Every module defining @triton.jit functions, in import order (common's helpers are called by the others).
KERNELS = ("kernels.common", "kernels.rmsnorm", "kernels.polynorm")


@pytest.fixture(scope="session")
def interp() -> Iterator[ModuleType]:
    """kernels.rmsnorm (and the other kernel modules) imported fresh with TRITON_INTERPRET=1, which is
    read when ``@triton.jit`` decorates.

    Copies imported earlier in this process are set aside for these tests and put back after.
    """
    import importlib

    saved = {name: sys.modules.pop(name, None) for name in KERNELS}
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITON_INTERPRET", "1")
            modules = [importlib.import_module(name) for name in KERNELS]
            yield modules[1]
    finally:
        for name, module in saved.items():
            sys.modules.pop(name, None)
            if module is not None:
                sys.modules[name] = module


@pytest.fixture(scope="session")
def poly(interp: ModuleType) -> ModuleType:
    """kernels.polynorm under the interpreter."""
    return sys.modules["kernels.polynorm"]


@pytest.fixture(scope="session")
def kernels_cli(interp: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> KernelsRun:
    """The shared ``perflab kernels`` run (tests/kernels/cli_run.py); its tests mark themselves
    ``xdist_group(cli_run.GROUP)`` so that it runs once, on one process."""
    return run_kernels(tmp_path_factory.mktemp("kernels-cli"))
