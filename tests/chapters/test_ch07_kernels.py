"""Chapter 7 kernels against PyTorch references, on the CPU through the Triton interpreter.

Shapes are chosen awkward (1 element, one past a block, partial tiles in both dimensions) so the
masks are exercised; the harness's smoke run covers only one shape per example.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context
from bench.define.protocol import import_file
from chapters.ch07.common import BLOCK, C_NEIGHBOUR, C_SELF, A, B, gather_pairs, particles

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


def run(module: ModuleType, inp: Any, out_shape: tuple[int, ...]) -> torch.Tensor:
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


@pytest.mark.parametrize("n", [1, BLOCK + 1, 2 * BLOCK + 3])
def test_gather_locality_orders_write_the_same_tensor(load: dict[str, ModuleType], n: int) -> None:
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=gen)
    s = torch.randint(n, (n,), generator=gen).sort().values  # with repeats, as in the benchmark
    perm = torch.randperm(n, generator=gen)
    src, dst = s[perm].to(torch.int32), perm.to(torch.int32)  # the pairs (s[j], j), shuffled
    shuffled = run(load["baseline_gather_locality"], (x, src, dst), (n,))
    in_order = run(load["optimized_gather_locality"], (x, s.to(torch.int32), torch.arange(n, dtype=torch.int32)), (n,))
    assert torch.equal(shuffled, x[s]) and torch.equal(in_order, x[s])


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (5, 130, 33), (130, 3, 7)])
def test_tiled_matmul_matches_reference(load: dict[str, ModuleType], variant: str, mnk: tuple[int, int, int]) -> None:
    m, n, k = mnk
    a, b = randn(m, k, seed=m), randn(k, n, seed=n)
    c = run(load[f"{variant}_tiled_matmul"], (a, b), (m, n))
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (3, BLOCK + 1), (2, 2 * BLOCK - 1)])
def test_pipelined_loads_match_reference(load: dict[str, ModuleType], shape: tuple[int, int]) -> None:
    x = randn(*shape, seed=shape[1])
    single = run(load["baseline_pipelined_loads"], x, shape[:1])
    staged = run(load["optimized_pipelined_loads"], x, shape[:1])
    torch.testing.assert_close(single, x.double().sum(1).float(), rtol=1e-5, atol=1e-5)
    assert torch.equal(single, staged)  # the stage count changes the schedule, never the sums


@pytest.mark.parametrize("shape", [(1, 1), (33, 130), (2, BLOCK + 1), (70, 3)])
def test_stencil_blocking_matches_reference(load: dict[str, ModuleType], shape: tuple[int, int]) -> None:
    x = randn(*shape, seed=shape[0])
    p = torch.nn.functional.pad(x, (1, 1, 1, 1))  # zero outside the grid
    ref = C_SELF * x + C_NEIGHBOUR * ((p[:-2, 1:-1] + p[2:, 1:-1]) + (p[1:-1, :-2] + p[1:-1, 2:]))
    rows = run(load["baseline_stencil_blocking"], x, shape)
    tiles = run(load["optimized_stencil_blocking"], x, shape)
    torch.testing.assert_close(rows, ref, rtol=1e-6, atol=1e-6)
    assert torch.equal(rows, tiles)


def test_stencil_grids_fit_cuda_at_full_size(load: dict[str, ModuleType]) -> None:
    """The H100 run of the first 16 x 16 Mi design failed with 'invalid argument': 131072 column blocks
    on the grid's 2nd dimension (limit 65535). The interpreter does not enforce the limit; this does."""
    from chapters.ch07.common import MAX_GRID_Y, stencil_programs

    m, n = 16, 16 * 2**20  # stencil_grid()'s full size
    for tile_m, tile_n in ((1, BLOCK), (16, 128)):
        assert stencil_programs(m, n, tile_m, tile_n, cols_fast=True)[1] <= MAX_GRID_Y
    with pytest.raises(ValueError, match="exceeds CUDA's 65535; walk the longer dimension first"):
        stencil_programs(m, n, 16, 128, cols_fast=False)


def test_gather_orders_hold_the_same_pairs() -> None:
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        (x, src_r, dst_r), _, work_r = gather_pairs("random")
        (x_s, src_s, dst_s), _, work_s = gather_pairs("sorted")
    finally:
        set_context(None)
    assert torch.equal(x, x_s) and work_r == work_s
    assert not torch.equal(dst_r, dst_s)  # shuffled, or the baseline would read in order too
    order = dst_r.argsort()
    assert torch.equal(dst_r[order], dst_s) and torch.equal(src_r[order], src_s)  # same (src, dst) pairs
    assert torch.equal(src_s, src_s.sort().values)
    with pytest.raises(ValueError, match="order='reversed'"):
        gather_pairs("reversed")
