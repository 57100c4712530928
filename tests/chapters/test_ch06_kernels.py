"""Chapter 6 kernels and launch shapes, on the CPU through the Triton interpreter, and compiled for sm_90.

Shapes are awkward (1 element, one past a block, grids smaller than the block count so the grid-stride
loop runs several times) so masks and loops are exercised; every autotuner candidate is checked, since on
the GPU any of them may win.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch
import triton

from chapters.ch06 import common as compiled_common  # at collection: compiled-mode kernels (see conftest)

CHAPTER = CH06 = Path(__file__).resolve().parents[2] / "chapters" / "ch06"  # for the interpreted fixture
VARIANTS = sorted(p.stem for p in CH06.glob("*_*.py") if p.stem.split("_")[0] in ("baseline", "optimized"))


def randn(n: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)) * scale


@pytest.mark.parametrize("n", [1, 257, 3 * 1024 + 5])
def test_silu_every_configuration_matches_reference(interpreted: dict[str, ModuleType], n: int) -> None:
    c = interpreted["common"]
    x = randn(n, seed=n, scale=4)
    ref = torch.nn.functional.silu(x.double())
    for block, warps in [(c.BASE_BLOCK, c.BASE_WARPS), *c.TUNE_CONFIGS]:
        out = torch.full_like(x, float("nan"))
        c.silu_launch(block, warps)(x, out)
        torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6, msg=f"BLOCK={block}")


def histogram_reference(x: torch.Tensor, bins: int, lo: float, hi: float) -> torch.Tensor:
    """Same fp32 arithmetic as the kernel: (x - lo) * scale, truncated, clamped to the edge bins."""
    b = ((x - lo) * (bins / (hi - lo))).to(torch.int32).clamp_(0, bins - 1)
    return torch.bincount(b.long(), minlength=bins).to(torch.int32)


@pytest.mark.parametrize("n", [1, 513, 7 * 512 + 3])
@pytest.mark.parametrize("programs", [1, 3, None])  # None: one per block
def test_histogram_grid_stride_counts_every_element_once(
    interpreted: dict[str, ModuleType], n: int, programs: int | None
) -> None:
    c = interpreted["common"]
    x = randn(n, seed=n + 1, scale=2)  # some values beyond [LO, HI): the edge bins
    hist = torch.full((c.BINS,), -7, dtype=torch.int32)  # the launch must zero it
    c.histogram_launch(c.block_programs if programs is None else lambda _: programs)(x, hist)
    assert torch.equal(hist, histogram_reference(x, c.BINS, c.LO, c.HI)) and int(hist.sum()) == n


def test_persistent_grid_is_sized_by_sms(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    c = interpreted["common"]
    n = 64 * 2**20
    assert c.block_programs(n) == triton.cdiv(n, c.HIST_BLOCK)
    assert c.persistent_programs(n) == 2 and c.persistent_programs(1) == 1  # smoke: 2, never more than blocks


@pytest.mark.parametrize("variant", VARIANTS)
def test_set_up_again_after_teardown(interpreted: dict[str, ModuleType], setup_again: Callable[[Path], None],
                                     variant: str) -> None:  # fmt: skip
    setup_again(CH06 / f"{variant}.py")  # the Triton kernels under the interpreter: a CPU has no Triton driver


def test_tiny_launch_sides_write_the_same_views(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    c = interpreted["common"]
    operands, out, work = c.parameter_set()
    p, g, ps, gs, outs = operands
    assert len(ps) == len(gs) == len(outs) > 1 and all(v.untyped_storage().data_ptr() == p.untyped_storage().data_ptr()
                                                       for v in ps)  # fmt: skip
    loop = torch.full_like(out, float("nan"))
    interpreted["baseline_tiny_launches"].launch((p, g, ps, gs, list(loop.split([v.numel() for v in ps]))), loop)
    interpreted["optimized_tiny_launches"].launch(operands, out)
    assert torch.equal(loop, out)
    torch.testing.assert_close(out.double(), p.double() - c.LR * g.double(), rtol=1e-6, atol=1e-7)
    assert work == {"bytes": 12 * p.numel(), "flops": 2 * p.numel()}


def test_prefetch_sides_move_every_page(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    (x, dev, page, piece), out, _ = interpreted["common"].host_array()
    assert x.numel() % page and x.numel() % piece and x.numel() > 2 * piece  # partial last page and piece
    paged = torch.full_like(out, float("nan"))
    interpreted["baseline_prefetch"].launch((x, dev, page, piece), paged)
    operands, _, _ = interpreted["optimized_prefetch"].staged()
    interpreted["optimized_prefetch"].launch(operands, out)
    assert torch.equal(paged, x * 2 + 1) and torch.equal(out, paged)


def test_async_launch_sides_agree_and_synchronize_as_claimed(
    interpreted: dict[str, ModuleType], cpu_smoke: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = interpreted["common"]
    x, out, work = c.decay_chain()
    calls: list[str] = []
    outs = {}
    for side in ("baseline", "optimized"):
        module = interpreted[f"{side}_async_launches"]
        step = module.decay_step
        monkeypatch.setattr(module, "decay_step", lambda *a, step=step: (calls.append("step"), step(*a)))
        monkeypatch.setattr(module, "synchronize", lambda device: calls.append("sync"))
        calls.clear()
        outs[side] = torch.full_like(out, float("nan"))
        module.launch(x, outs[side])
        expected = ["step", "sync"] * c.STEPS if side == "baseline" else ["step"] * c.STEPS + ["sync"]
        assert calls == expected, side  # the baseline waits after every launch, the optimized side once
    assert torch.equal(outs["baseline"], outs["optimized"])
    factor = sum(c.DECAY**k for k in range(c.STEPS + 1))
    torch.testing.assert_close(outs["optimized"].double(), x.double() * factor, rtol=1e-6, atol=1e-7)
    assert work == {"bytes": 12 * x.numel() * c.STEPS, "flops": 2 * x.numel() * c.STEPS}
    x.copy_(torch.randn(x.shape, generator=torch.Generator().manual_seed(7)))
    for side in ("baseline", "optimized"):
        interpreted[f"{side}_async_launches"].launch(x, outs[side])
    assert torch.equal(outs["baseline"], outs["optimized"])
    torch.testing.assert_close(outs["baseline"].double(), x.double() * factor, rtol=1e-6, atol=1e-7)


def test_kernels_compile_for_h100(compile_sm90: Callable[..., bytes]) -> None:
    c = compiled_common
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    for block, warps in [(c.BASE_BLOCK, c.BASE_WARPS), *c.TUNE_CONFIGS]:
        assert compile_sm90(c.silu, sig, {"BLOCK": block}, num_warps=warps)
    sig = {"x_ptr": "*fp32", "hist_ptr": "*i32", "n": "i32", "lo": "fp32", "scale": "fp32"}
    assert compile_sm90(c.histogram, sig, {"BINS": c.BINS, "BLOCK": c.HIST_BLOCK})
