"""Chapter 8 kernels against float64 references: on the CPU through the Triton interpreter, on a CUDA GPU
compiled (when there is one), and compiled for an H100 without a GPU.

Shapes are awkward (1 element, one past a block, partial tiles and a partial K step) so every mask
is exercised; the harness's smoke run covers one shape per example. The sm_90 compilations check
what the interpreter cannot: that Triton compiles each kernel for Hopper, the register_pressure
pair's premise (the 4-warp tile spills, the 8-warp one does not) and rows_per_program's (a program
loads one 256-byte row, against 64 rows in 16-byte loads).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from triton_checks import MODES, Kernels, compile_for_h100, kernel_modes, needs_compiler, resources, variants

import chapters.ch08.common as C  # compiled kernels (imported before the interpreter fixture swaps copies in)
from bench.define.config import resolve_config
from bench.define.context import make_context, set_context

VARIANTS = ("baseline", "optimized")
COMPILED_FILES = variants("ch08")  # compiled at collection (unless the whole process is interpreted)


@pytest.fixture(scope="module", params=MODES)
def load(request: pytest.FixtureRequest) -> Iterator[Kernels]:
    yield from kernel_modes(request.param, "ch08", ("chapters.ch08.common",), COMPILED_FILES)


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def run(k: Kernels, stem: str, *operands: Any, out: torch.Tensor) -> torch.Tensor:
    """``stem``'s launch on k's device (tensors moved there, out NaN-filled: every element must be
    written); the output back on the CPU."""
    moved = [x.to(k.device) if isinstance(x, torch.Tensor) else x for x in operands]
    dev_out = torch.full_like(out, float("nan"), device=k.device)
    k[stem].get_benchmark().launch(*moved, dev_out)
    return dev_out.cpu()


def chain64(x: torch.Tensor, a: torch.Tensor | float, b: torch.Tensor | float, length: int) -> torch.Tensor:
    y = x.double()
    for _ in range(length):
        y = y * a + b
    return y


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (37, 45, 40), (130, 260, 72)])
def test_register_pressure_matmul_matches_reference(load: Kernels, variant: str, mnk: tuple[int, int, int]) -> None:
    m, n, k = mnk
    a, b = randn(m, k, seed=m).bfloat16(), randn(k, n, seed=n).bfloat16()
    out = run(load, f"{variant}_register_pressure", a, b, out=torch.empty(m, n, dtype=torch.bfloat16))
    assert rel_err(out, a.double() @ b.double()) < 4e-3  # the output's bf16 rounding: 2^-9 relative at most


@pytest.mark.parametrize("n", [1, 129, 3 * 1024 + 7])
def test_ilp_chains_match_reference(load: Kernels, n: int) -> None:
    x, length = randn(n, seed=n), 16
    one, eight = (
        run(load, f"{v}_ilp", x, C.chain_trips(length), out=torch.empty(n)) for v in ("baseline", "optimized")
    )
    assert rel_err(one, chain64(x, C.A_CHAIN, C.B_CHAIN, length)) < 1e-6
    assert torch.equal(one, eight)  # the same FMAs per element, only grouped differently


@pytest.mark.parametrize("n", [1, 5, 1025, 3 * 1024 + 7])
def test_divergence_versions_match_reference(load: Kernels, n: int) -> None:
    x = 1.5 * randn(n, seed=n)
    if n == 1025:  # the second block holds one piece only: the branchy kernel skips three branches there
        x[1024] = 0.5
    a, b, length = torch.tensor(C.A_PIECE), torch.tensor(C.B_PIECE), 16
    branchy, free = (run(load, f"{v}_divergence", x, a, b, C.chain_trips(length), out=torch.empty(n)) for v in VARIANTS)
    piece = (x >= -1).long() + (x >= 0).long() + (x >= 1).long()
    assert rel_err(branchy, chain64(x, a.double()[piece], b.double()[piece], length)) < 1e-6
    assert torch.equal(branchy, free)  # each element's chain is the same FMAs with the same coefficients


@pytest.mark.parametrize("variant,tol", [("baseline", 1e-5), ("optimized", 1e-6)])
@pytest.mark.parametrize("shape", [(1, 1), (3, C.ROW_BLOCK + 1), (2, 2 * C.ROW_BLOCK + 5)])
def test_atomic_reduction_matches_reference(load: Kernels, variant: str, tol: float, shape: tuple[int, int]) -> None:
    x = randn(*shape, seed=shape[1]) + 0.5  # a nonzero mean: the sums do not cancel to ~0
    out = run(load, f"{variant}_atomic_reduction", x, out=torch.empty(shape[0]))
    assert rel_err(out, x.double().sum(1)) < tol


@pytest.mark.parametrize("shape", [(1, 1), (37, 61), (2 * C.ROWS_PER_PROGRAM + 5, C.NARROW), (70, 100)])
def test_rows_per_program_matches_reference(load: Kernels, shape: tuple[int, int]) -> None:
    x = randn(*shape, seed=shape[0]) + 0.5  # a nonzero mean: the sums do not cancel to ~0
    one, tile = (run(load, f"{v}_rows_per_program", x, out=torch.empty(shape[0])) for v in VARIANTS)
    assert rel_err(one, x.double().sum(1)) < 1e-6
    assert load.same(tile, one, rtol=1e-6)  # each row's additions alone, whatever the rows per program


def test_chain_length_must_be_a_multiple_of_the_unroll() -> None:
    assert C.chain_trips(1024) == 128
    with pytest.raises(ValueError, match="chain length 12 must be a positive multiple of 8"):
        C.chain_trips(12)


def test_smoke_inputs_have_partial_blocks() -> None:
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        (x,), out, work = C.wide_rows()
        (xc, trips), _, chain_work = C.chain_inputs()
        (xn,), out_n, narrow_work = C.narrow_rows()
    finally:
        set_context(None)
    assert x.shape[1] % C.ROW_BLOCK and out.shape == (x.shape[0],)
    assert xn.shape[0] % C.ROWS_PER_PROGRAM and xn.shape[1] < C.NARROW and out_n.shape == (xn.shape[0],)
    assert narrow_work["bytes"] == 4 * xn.numel() + 4 * xn.shape[0]
    assert work["bytes"] == 4 * x.numel() + 4 * x.shape[0]
    assert xc.numel() % 1024 and chain_work["flops"] == 2 * C.UNROLL * trips * xc.numel()


@pytest.mark.parametrize("variant", VARIANTS)
def test_divergence_inputs_exclude_the_coefficients(variant: str) -> None:
    """The harness changes a benchmark's inputs in place to see its output follow: the piece coefficients
    are constants of the function (changed, |a| > 1 would overflow the chains), only x is data."""
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    bench = COMPILED_FILES[f"{variant}_divergence"].get_benchmark()
    try:
        bench.setup()
        (inputs,) = bench.get_inputs()
        assert inputs is bench.args[0]
    finally:
        bench.teardown()
        set_context(None)


# --- compiled for sm_90 (no GPU needed) ---------------------------------------------------------

BF16 = torch.empty(16, dtype=torch.bfloat16)
FP32 = torch.empty(16)
MATMUL_ARGS = {"a_ptr": BF16, "b_ptr": BF16, "c_ptr": BF16, "bias_ptr": BF16, "M": 8192, "N": 8192, "K": 8192}
MATMUL_CONSTS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "BIAS_GELU": False, "UPCAST": False}


@needs_compiler
def test_register_pressure_premise_on_h100() -> None:
    """The baseline's 4-warp tile spills its accumulator; the optimized 8-warp one does not (sm_90)."""
    four = resources(compile_for_h100(C.matmul_kernel, MATMUL_ARGS, MATMUL_CONSTS, num_warps=4, num_stages=3))
    eight = resources(compile_for_h100(C.matmul_kernel, MATMUL_ARGS, MATMUL_CONSTS, num_warps=8, num_stages=3))
    assert four["REG"] == 255 and four["STACK"] > 0, four
    assert eight["STACK"] == 0 and eight["REG"] < 255, eight


ROWS = 819200  # rows_per_program at full size on an H100: 200 MiB of 64-wide rows


def row_sums_options(monkeypatch: pytest.MonkeyPatch, rows_per_program: int) -> dict[str, Any]:
    """The grid and options ``row_sums_launch`` gives the kernel for the H100-sized matrix (nothing runs)."""
    seen: dict[str, Any] = {}

    class Recorder:
        def __getitem__(self, grid: tuple[int, ...]) -> Any:
            return lambda *args, **options: seen.update(grid=grid, **options)

    with monkeypatch.context() as mp:
        mp.setattr(C, "row_sums", Recorder())
        C.row_sums_launch(rows_per_program)(
            torch.empty(ROWS, C.NARROW, device="meta"), torch.empty(ROWS, device="meta")
        )
    return seen


# (rows per program, warps, the per-thread load instruction, how many of them per thread)
ROW_PROGRAMS = [(1, 1, "ld.global.v2.b32", 1), (C.ROWS_PER_PROGRAM, 4, "ld.global.v4.b32", 8)]


@needs_compiler
@pytest.mark.parametrize("rows,warps,vector,loads", ROW_PROGRAMS)
def test_rows_per_program_premise_on_h100(
    monkeypatch: pytest.MonkeyPatch, rows: int, warps: int, vector: str, loads: int
) -> None:
    """rows_per_program's programs as the docstrings say (sm_90): one warp per row with one 8-byte load per
    thread (256 B per program), against four warps per 64 rows with eight 16-byte loads per thread (16 KiB)."""
    options = row_sums_options(monkeypatch, rows)
    assert options["grid"] == (ROWS // rows,) and options["num_warps"] == warps
    constexprs = {"BLOCK_M": options["BLOCK_M"], "BLOCK_N": options["BLOCK_N"]}
    args = {"x_ptr": FP32, "out_ptr": FP32, "n_rows": ROWS, "n_cols": C.NARROW}
    compiled = compile_for_h100(C.row_sums, args, constexprs, num_warps=warps)
    assert resources(compiled)["STACK"] == 0
    assert compiled.asm["ptx"].count(vector) == loads


# (file stem, kernel name, example arguments as at full size, constexprs, launch options)
KERNELS = [
    ("common", "chains", {"x_ptr": FP32, "out_ptr": FP32, "n": 4 * 2**20, "a": 0.5, "b": 0.5, "trips": 128},
     {"BLOCK": 1024}, {"num_warps": 4}),
    *((f"{v}_divergence", k, {"x_ptr": FP32, "a_ptr": FP32, "b_ptr": FP32, "out_ptr": FP32, "n": 16 * 2**20,
                              "trips": 32}, {"BLOCK": 1024}, {"num_warps": 4})
      for v, k in (("baseline", "piecewise_branchy"), ("optimized", "piecewise_branch_free"))),
    ("baseline_atomic_reduction", "row_sums_atomic", {"x_ptr": FP32, "out_ptr": FP32, "n_cols": 781248},
     {"BLOCK": C.ROW_BLOCK}, {"num_warps": 4}),
    ("optimized_atomic_reduction", "row_partials", {"x_ptr": FP32, "part_ptr": FP32, "n_cols": 781248},
     {"BLOCK": C.ROW_BLOCK}, {"num_warps": 4}),
    ("optimized_atomic_reduction", "sum_partials", {"part_ptr": FP32, "out_ptr": FP32, "n_parts": 191},
     {"BLOCK": 256}, {"num_warps": 4}),
]  # fmt: skip


@needs_compiler
@pytest.mark.parametrize("stem,name,args,constexprs,options", KERNELS, ids=[f"{k[0]}.{k[1]}" for k in KERNELS])
def test_kernel_compiles_for_h100(stem: str, name: str, args: dict, constexprs: dict, options: dict) -> None:
    module = C if stem == "common" else COMPILED_FILES[stem]
    compiled = compile_for_h100(getattr(module, name), args, constexprs, **options)
    if name == "row_sums_atomic":  # one atomic per element, reduction-only (no value returned)
        assert "red.global" in compiled.asm["ptx"] or "atom.global" in compiled.asm["ptx"]
