"""Chapter 7 kernels against PyTorch references, on the CPU through the Triton interpreter.

Shapes are chosen awkward (1 element, one past a block, partial tiles in both dimensions) so the
masks are exercised; the harness's smoke run covers only one shape per example.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from bench.config import resolve_config
from bench.context import make_context, set_context
from bench.protocol import import_file
from chapters.ch07.common import BLOCK, A, B, particles

CH07 = Path(__file__).resolve().parents[2] / "chapters" / "ch07"
COMMON = "chapters.ch07.common"


@pytest.fixture(scope="module")
def load() -> Iterator[dict[str, ModuleType]]:
    """Every ch07 variant file and a fresh ``common``, imported with TRITON_INTERPRET=1 (CPU kernels).

    Triton reads the variable when ``@triton.jit`` decorates, i.e. at import, so a ``common``
    imported earlier in this process is set aside for the module's tests and put back after.
    """
    saved = sys.modules.pop(COMMON, None)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITON_INTERPRET", "1")
            yield {p.stem: import_file(p) for p in [*CH07.glob("baseline_*.py"), *CH07.glob("optimized_*.py")]}
    finally:
        sys.modules.pop(COMMON, None)
        if saved is not None:
            sys.modules[COMMON] = saved


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def run(module: ModuleType, inp: torch.Tensor, out_shape: tuple[int, ...]) -> torch.Tensor:
    out = torch.full(out_shape, float("nan"))  # every element must be written
    module.get_benchmark().launch(inp, out)
    return out


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("n", [1, BLOCK + 1, 3 * BLOCK - 5])
def test_coalescing_matches_reference(load: dict[str, ModuleType], variant: str, n: int) -> None:
    x = randn(n, seed=n)
    torch.testing.assert_close(run(load[f"{variant}_coalescing"], x, (n,)), x * A + B, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("n", [1, 129, BLOCK + 1])
def test_vectorized_copy_matches_input(load: dict[str, ModuleType], variant: str, n: int) -> None:
    x = randn(n, seed=n)
    assert torch.equal(run(load[f"{variant}_vectorized_copy"], x, (n,)), x)


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("shape", [(1, 1), (70, 130), (130, 65), (3, BLOCK + 2)])
def test_transpose_matches_reference(load: dict[str, ModuleType], variant: str, shape: tuple[int, int]) -> None:
    x = randn(*shape, seed=shape[0])
    assert torch.equal(run(load[f"{variant}_transpose"], x, shape[::-1]), x.T)


@pytest.mark.parametrize("n", [1, BLOCK + 1, 2 * BLOCK + 3])
def test_aos_soa_matches_reference(load: dict[str, ModuleType], n: int) -> None:
    fields = randn(4, n, seed=n)
    ref = fields[0] * fields[0] + fields[1] * fields[1]
    aos = run(load["baseline_aos_soa"], fields.T.contiguous(), (n,))
    soa = run(load["optimized_aos_soa"], fields, (n,))
    torch.testing.assert_close(aos, ref, rtol=1e-6, atol=1e-6)
    assert torch.equal(aos, soa)


def test_layouts_hold_the_same_particles() -> None:
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        aos, _, work_aos = particles("aos")
        soa, _, work_soa = particles("soa")
    finally:
        set_context(None)
    assert aos.shape == soa.T.shape and torch.equal(aos, soa.T)
    assert work_aos == work_soa  # same minimum work: the layout is the only change
    with pytest.raises(ValueError, match="layout='aosoa'"):
        particles("aosoa")
