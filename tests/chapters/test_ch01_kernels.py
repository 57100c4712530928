"""Chapter 1's fused Triton kernel against the PyTorch chain, on the CPU through the Triton interpreter.

Shapes are awkward (1 element, one short of and one past a block, a 2-D tensor whose size is no
multiple of the block) so the mask is exercised; the harness's smoke run covers only one length.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
import triton

from bench.define.protocol import import_file
from chapters.ch01.common import BLOCK, A, B, C

FUSION = Path(__file__).resolve().parents[2] / "chapters" / "ch01" / "optimized_fusion.py"


@pytest.fixture(scope="module")
def fusion() -> Iterator[ModuleType]:
    """optimized_fusion imported with TRITON_INTERPRET=1: Triton reads it when ``@triton.jit`` decorates."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        yield import_file(FUSION)


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [(1,), (BLOCK - 1,), (BLOCK + 1,), (3 * BLOCK + 5,), (7, 300)])
def test_fused_matches_chain(fusion: ModuleType, shape: tuple[int, ...]) -> None:
    x = randn(*shape, seed=sum(shape))
    out = torch.full_like(x, float("nan"))  # every element must be written
    fusion.launch(x, out)
    torch.testing.assert_close(out, torch.relu(x * A + B) * C, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("a,b,c", [(-2.0, 0.5, 3.0), (0.25, 0.1, -1.0)])
def test_fused_kernel_takes_its_coefficients(fusion: ModuleType, a: float, b: float, c: float) -> None:
    n = 2 * BLOCK + 3
    x = randn(n, seed=n)
    out = torch.full_like(x, float("nan"))
    fusion.scale_shift_relu_scale[(triton.cdiv(n, BLOCK),)](x, out, a, b, c, n, BLOCK=BLOCK)
    ref = torch.relu(x * a + b) * c
    assert (ref == 0).any() and (ref != 0).any()  # both branches of the relu are taken
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
