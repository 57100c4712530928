"""Chapter 20: every configuration a search may pick computes the right answer (float64 references, Triton
interpreted on the CPU, awkward shapes), the pruning rules, what a search records, and the kernels compiled
for an H100 (sm_90) without a GPU, with the register counts the rmsnorm pairs' predictions rest on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch
import triton
from triton_checks import compile_for_h100, needs_compiler, resources

import chapters.ch20.common as compiled  # at collection: compiled-mode kernels (for the sm_90 builds)
from bench.define.config import resolve_config
from bench.define.context import make_context, set_context
from tests.session import slow_for

CHAPTER = CH20 = Path(__file__).resolve().parents[2] / "chapters" / "ch20"  # for the interpreted fixture
# The searched pairs' variants (the case study's have tests/chapters/test_ch20_case.py)
VARIANTS = sorted(p.stem for p in CH20.glob("*_*.py")
                  if p.stem.split("_")[0] in ("baseline", "optimized") and "_case_" not in p.stem)  # fmt: skip


def randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).bfloat16()


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


# --- every candidate is correct ------------------------------------------------------------------------


@pytest.mark.parametrize("mnk", [(1, 1, 1), (37, 72, 40), pytest.param((130, 67, 300), marks=pytest.mark.slow)])
def test_every_matmul_candidate_matches_float64(interpreted: dict[str, ModuleType], mnk: tuple[int, int, int]) -> None:
    """All 24 tiles of matmul_search's space and all 20 tile x split candidates of split_k_search's, pruned or
    not: the search may pick any of them. K splits into runs some of which are empty at small K."""
    c = interpreted["common"]
    m, n, k = mnk
    a, b = randn(m, k, seed=m), randn(k, n, seed=n)
    ref = a.double() @ b.double()
    for config in [*c.MATMUL_SPACE, *c.SPLITK_SPACE]:
        split = config.kwargs["SPLIT_K"] > 1
        out = torch.full((m, n), float("nan"), dtype=torch.float32 if split else torch.bfloat16)
        c.fixed_matmul(config)((a, b), out)
        assert rel(out, ref) < (1e-5 if split else 8e-3), c.describe(config)  # bf16 out: one step (truncated)


@pytest.mark.parametrize("m,n", [(1, 1), (37, 40), (5, 1100), (3, 4097)])
def test_every_rmsnorm_candidate_matches_float64(interpreted: dict[str, ModuleType], m: int, n: int) -> None:
    c = interpreted["common"]
    x, w = randn(m, n, seed=n, scale=2.0), randn(n, seed=m, scale=0.5)
    x64 = x.double()
    ref = x64 / torch.sqrt((x64 * x64).mean(dim=1, keepdim=True) + c.EPS) * w.double()
    default = c.norm_default(n)
    space = c.norm_space(n, default)
    assert sum(cfg is default for cfg in space) == 1
    for config in space:
        out = torch.full_like(x, float("nan"))
        c.rmsnorm_kernel[c.norm_grid(m)(config.all_kwargs())](x, w, out, m, n, c.EPS, **config.all_kwargs())
        assert rel(out, ref) < 8e-3, c.describe(config)  # bf16 output (the interpreter truncates to it)


def test_split_side_zeroes_its_output_before_adding_into_it(interpreted: dict[str, ModuleType]) -> None:
    c = interpreted["common"]
    a, b = randn(40, 700, seed=1), randn(700, 48, seed=2)
    out = torch.full((40, 48), 1e6)
    split = next(cfg for cfg in c.SPLITK_SPACE if cfg.kwargs["SPLIT_K"] == 4)
    c.fixed_matmul(split)((a, b), out)
    c.fixed_matmul(split)((a, b), out)  # twice: a second call must not add onto the first's sums
    assert rel(out, a.double() @ b.double()) < 1e-5


# --- the spaces and their pruning ----------------------------------------------------------------------


def test_matmul_spaces_hold_their_defaults_and_fit_sm90_at_full_size() -> None:
    c = compiled
    assert sum(cfg is c.MATMUL_DEFAULT for cfg in c.MATMUL_SPACE) == 1 and len(c.MATMUL_SPACE) == 24
    assert sum(cfg is c.SPLITK_DEFAULT for cfg in c.SPLITK_SPACE) == 1 and len(c.SPLITK_SPACE) == 20
    full = {"M": 8192, "N": 8192, "K": 8192}
    assert all(c.matmul_fits(cfg, full) for cfg in c.MATMUL_SPACE)
    assert all(c.matmul_fits(cfg, {"M": 1024, "N": 1024, "K": 65536}) for cfg in c.SPLITK_SPACE)


@pytest.mark.parametrize("config,args,why", [
    (compiled.tile(256, 256, 64, 8, 4), {"M": 8192, "N": 8192, "K": 8192}, "shared memory: 256 KiB of buffers"),
    (compiled.tile(128, 256, 64, 4, 3), {"M": 8192, "N": 8192, "K": 8192}, "registers: 256 accumulators a thread"),
    (compiled.tile(128, 64, 64, 4, 3), {"M": 37, "N": 72, "K": 40}, "a tile twice the problem's rows"),
    (compiled.tile(64, 64, 64, 4, 3, split=16), {"M": 64, "N": 64, "K": 1024}, "one K step a split"),
])  # fmt: skip
def test_pruning_rejects(config: triton.Config, args: dict, why: str) -> None:
    assert not compiled.matmul_fits(config, args), why


def test_norm_space_gives_each_thread_a_sensible_share() -> None:
    for n in (128, 16384):
        default = compiled.norm_default(n)
        for cfg in compiled.norm_space(n, default):
            kw = cfg.kwargs
            per_thread = kw["ROWS"] * kw["BLOCK"] / (32 * cfg.num_warps)
            assert kw["ONE_PASS"] == (kw["BLOCK"] >= n), compiled.describe(cfg)
            assert cfg is default or 1 <= per_thread <= (128 if kw["ONE_PASS"] else 32), compiled.describe(cfg)


# --- the search ----------------------------------------------------------------------------------------


def test_search_records_its_cost_choice_and_estimate(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    c = interpreted["common"]
    from bench import context

    operands, _, _ = c.matmul_operands(37, 48, 300)
    out = torch.empty(37, 48)  # fp32: split candidates add their partial sums into it
    tuned = c.TunedMatmul(c.SPLITK_SPACE, c.SPLITK_DEFAULT, zero=True)
    tuned.prepare(operands, out)
    sizes = context().sizes
    timed = sizes["configs_timed"]
    shape = {"M": 37, "N": 48, "K": 300}
    kept = [cfg for cfg in c.SPLITK_SPACE if cfg is c.SPLITK_DEFAULT or c.matmul_fits(cfg, shape)]
    assert sizes["configs_in_space"] == 20 and timed == len(kept) > 1
    assert sizes["search_s"] > 0 and sizes["config"] == c.describe(tuned.search.best)
    assert sizes["default_in_search_ms"] > 0 and sizes["best_in_search_ms"] <= sizes["default_in_search_ms"]
    assert sizes["search_gain"] >= 1.0
    out.fill_(float("nan"))
    tuned.launch(operands, out)  # the chosen configuration, looked up: no second search
    assert rel(out, operands[0].double() @ operands[1].double()) < 1e-5


def test_search_refuses_a_space_without_its_default(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    c = interpreted["common"]
    with pytest.raises(ValueError, match="must be in the search space"):
        c.Search(c.matmul_kernel, c.MATMUL_SPACE[1:], c.MATMUL_DEFAULT, key=["M"], prune=lambda cfg, a: True)


# The rmsnorm searches (37 rows of 40, ~30 s interpreted; the wide one 14 s) are in the full tier only: the other
# searches' variants run the same harness recheck
@pytest.mark.parametrize("variant", slow_for(VARIANTS, {"optimized_rmsnorm_heads", "optimized_rmsnorm_wide"}))
def test_set_up_again_after_teardown(interpreted: dict[str, ModuleType], setup_again: Callable[[Path], None],
                                     variant: str) -> None:  # fmt: skip
    setup_again(CH20 / f"{variant}.py")


def test_optimized_sides_allow_the_search_its_time() -> None:
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        for stem in VARIANTS:
            if stem.startswith("optimized_"):
                from bench.define.protocol import load_benchmark

                config = load_benchmark(CH20 / f"{stem}.py").get_config()
                assert config is not None and config.setup_timeout_seconds >= 600, stem
    finally:
        set_context(None)


# --- compiled for sm_90 (no GPU needed) ----------------------------------------------------------------

BF16, F32 = torch.empty(16, dtype=torch.bfloat16), torch.empty(16)


def build_matmul(config: triton.Config, out: torch.Tensor, mnk: tuple[int, int, int]) -> dict[str, int]:
    m, n, k = mnk
    args = {"a_ptr": BF16, "b_ptr": BF16, "c_ptr": out, "M": m, "N": n, "K": k}
    compiled_ = compile_for_h100(compiled.matmul_kernel, args, {**config.kwargs, "UPCAST": False},
                                 num_warps=config.num_warps, num_stages=config.num_stages)  # fmt: skip
    return resources(compiled_)


def build_norm(rows: int, block: int, one_pass: bool, warps: int, n: int) -> dict[str, int]:
    args = {"x_ptr": BF16, "w_ptr": BF16, "out_ptr": BF16, "M": 6103, "N": n, "eps": 1e-6}
    constexprs = {"ROWS": rows, "BLOCK": block, "ONE_PASS": one_pass}
    return resources(compile_for_h100(compiled.rmsnorm_kernel, args, constexprs, num_warps=warps))


@needs_compiler
@pytest.mark.parametrize("config", [compiled.MATMUL_DEFAULT, compiled.tile(128, 256, 64, 8, 3),
                                    compiled.tile(256, 128, 64, 8, 4)], ids=compiled.describe)  # fmt: skip
def test_matmul_candidates_compile_without_spills(config: triton.Config) -> None:
    assert build_matmul(config, BF16, (8192, 8192, 8192))["STACK"] == 0


@needs_compiler
def test_split_k_candidate_compiles_with_fp32_atomics() -> None:
    usage = build_matmul(compiled.tile(128, 128, 64, 8, 3, split=4), F32, (1024, 1024, 65536))
    assert usage["STACK"] == 0


@needs_compiler
def test_rmsnorm_register_counts_behind_the_predictions() -> None:
    """The wide rows' default holds 128 fp32 values a thread: over 200 registers, so at most two 4-warp programs
    fit an SM's 64 Ki registers (8 warps of 64); on 16 warps the same row takes under 64 registers a thread.
    Neither spills. The heads' default is a tiny program: a few registers, 128 threads for 256 bytes."""
    wide_default = build_norm(1, 16384, True, 4, 16384)
    wide_16 = build_norm(1, 16384, True, 16, 16384)
    heads_default, heads_32 = build_norm(1, 128, True, 4, 128), build_norm(32, 128, True, 4, 128)
    assert all(u["STACK"] == 0 for u in (wide_default, wide_16, heads_default, heads_32))
    assert wide_default["REG"] > 200 and 65536 // (wide_default["REG"] * 128) <= 2
    assert wide_16["REG"] <= 64
    assert heads_default["REG"] <= 32
