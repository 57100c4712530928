"""Chapter 2 kernels and launch shapes, on the CPU through the Triton interpreter.

Shapes are awkward (1 element, one past a block, chunks that do not divide the tensor) so the masks and
the last chunk are exercised; the harness's smoke run covers one shape per example. The grid tests use
the full-size formulas with real SM counts: the interpreter runs any grid, a GPU pays for the wrong one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import DeviceFacts, RunContext
from chapters.ch02 import common as compiled_common  # at collection: compiled-mode kernels (see conftest)

CHAPTER = CH02 = Path(__file__).resolve().parents[2] / "chapters" / "ch02"  # for the interpreted fixture


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def relax_reference(x: torch.Tensor, passes: int, c1: float, c2: float) -> torch.Tensor:
    y = x.double()
    for _ in range(passes):
        y = y - c2 * y * y.abs() + c1
    return y


@pytest.mark.parametrize("n", [1, 1025, 3 * 1024 - 5])
def test_relax_pass_matches_reference_in_place_too(interpreted: dict[str, ModuleType], n: int) -> None:
    c = interpreted["common"]
    x = randn(n, seed=n) * 3  # values where the |x| term matters
    out = torch.full_like(x, float("nan"))
    c.relax_pass(x, out)
    torch.testing.assert_close(out.double(), relax_reference(x, 1, c.RELAX_C1, c.RELAX_C2), rtol=1e-6, atol=1e-6)
    c.relax_pass(out, out)  # in place, as passes 2.. run
    torch.testing.assert_close(out.double(), relax_reference(x, 2, c.RELAX_C1, c.RELAX_C2), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("n", "chunk"),
    [(1, 5), (2500, 1100), (2500, 1024), (3000, 3001), pytest.param(777, 1, marks=pytest.mark.slow)],  # 2,331 launches
)
def test_blocked_passes_equal_streamed_passes(interpreted: dict[str, ModuleType], n: int, chunk: int) -> None:
    x = randn(n, seed=chunk)
    streamed, blocked = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    passes = 3
    interpreted["baseline_l2_blocking"].launch((x, chunk, passes), streamed)
    interpreted["optimized_l2_blocking"].launch((x, chunk, passes), blocked)
    c = interpreted["common"]
    ref = relax_reference(x, passes, c.RELAX_C1, c.RELAX_C2)
    torch.testing.assert_close(streamed.double(), ref, rtol=1e-5, atol=1e-6)
    assert torch.equal(streamed, blocked)  # same kernels on the same elements, only the order of the loops differs


def full_size_context(l2_bytes: int, sms: int) -> RunContext:
    facts = DeviceFacts(name="test GPU", memory_bytes=80 * 2**30, l2_bytes=l2_bytes, cores=sms, capability=(9, 0))
    config = resolve_config({"device": "cpu", "smoke": False})
    return RunContext(device=torch.device("cpu"), seed=0, smoke=False, config=config, facts=facts)


@pytest.mark.parametrize("l2_bytes", [50 * 2**20, 60 * 2**20])  # H100, H200
def test_l2_chunks_are_whole_blocks_and_fit_l2(interpreted: dict[str, ModuleType], l2_bytes: int) -> None:
    """The full-size chunk is a quarter of L2 and a whole number of programs (16-byte aligned views)."""
    c = interpreted["common"]
    ctx = full_size_context(l2_bytes, 132)
    n = ctx.working_set(l2=8, smoke=0, name="working_set") // 4
    chunk = ctx.working_set(l2=0.25, smoke=0, name="chunk") // 4
    assert chunk % c.BLOCK == 0 and n % chunk == 0
    assert 4 * chunk * 2 <= l2_bytes // 2  # x's and out's chunk together: at most half the L2
    assert 4 * n >= 8 * l2_bytes  # the streamed working set is far beyond L2


def iterate_reference(x: torch.Tensor, iters: int, a: float, b: float) -> torch.Tensor:
    z = x.double()
    for _ in range(iters):
        z = z * a + b
    return z


@pytest.mark.parametrize("full_wave", [False, True])
def test_waves_variants_match_reference(interpreted: dict[str, ModuleType], cpu_smoke: None, full_wave: bool) -> None:
    c = interpreted["common"]
    (x, per_program, iters), out, _ = c.wave_problem(full_wave=full_wave)
    out.fill_(float("nan"))
    c.iterate_launch((x, per_program, iters), out)
    torch.testing.assert_close(out.double(), iterate_reference(x, iters, c.WAVE_A, c.WAVE_B), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("n", "per_program"), [(1, 4096), (500, 37), (3 * 4096 + 11, 5000), (3 * 4096 + 11, 8192)])
def test_iterate_range_covers_every_element_once(interpreted: dict[str, ModuleType], n: int, per_program: int) -> None:
    c = interpreted["common"]
    x = randn(n, seed=per_program)
    out = torch.full_like(x, float("nan"))
    c.iterate_launch((x, per_program, 3), out)
    torch.testing.assert_close(out.double(), iterate_reference(x, 3, c.WAVE_A, c.WAVE_B), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("sms", [132, 114, 78, 2])  # H100 SXM / H200, H100 PCIe, a smaller part, a CPU
def test_wave_grids_at_full_size(interpreted: dict[str, ModuleType], sms: int) -> None:
    """Baseline: SMs + 1 programs (one runs alone, a second wave); optimized: exactly SMs, equal shares."""
    c = interpreted["common"]
    n = (sms + 1) * 107 * c.TILE  # wave_problem's full size
    baseline = -(-n // (107 * c.TILE))
    per_program = c.wave_programs(n, sms)
    optimized = -(-n // per_program)
    assert baseline == sms + 1 and optimized == sms
    assert per_program % c.TILE == 0
    assert per_program * sms - n < c.TILE * sms  # shares differ by less than a tile each


def test_tensor_core_sides_agree_within_the_declared_rtol(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    c = interpreted["common"]
    (a, b), out32, work = c.product()
    out16 = torch.empty_like(out32)
    c.fp32_product((a, b), out32)
    interpreted["optimized_tensor_cores"].launch((a, b), out16)
    ref = a.double() @ b.double()
    err = float((out16.double() - ref).norm() / ref.norm())
    assert 1e-4 < err < 1e-2  # bf16 rounding is visible, and within the declared rtol
    assert interpreted["optimized_tensor_cores"].get_benchmark().get_config().rtol == 1e-2
    assert work["flops"] == 2 * a.shape[0] * a.shape[1] * b.shape[1]


def tf32(x: torch.Tensor, truncate: bool) -> torch.Tensor:
    """fp32 values as TF32 holds them: the low 13 of 23 mantissa bits cut, or rounded (half away from zero)."""
    bits = x.view(torch.int32)
    if not truncate:
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("truncate", [False, True])
def test_tf32_tolerance_covers_tf32_rounding(interpreted: dict[str, ModuleType], cpu_smoke: None,
                                             truncate: bool) -> None:  # fmt: skip
    """The TF32 variant's declared rtol holds the difference TF32 operands make once both sides deliver bf16
    (emulated: a CPU has no TF32), and that difference is visible (the emulation rounds something)."""
    c = interpreted["common"]
    (a, b), out, work = c.product()
    c.fp32_product((a, b), out)
    emulated = (tf32(a.clone(), truncate) @ tf32(b.clone(), truncate)).to(torch.bfloat16)
    err = float((emulated.double() - out.double()).norm() / out.double().norm())
    bench = interpreted["optimized_tensor_cores_tf32"].get_benchmark()
    assert 1e-4 < err < bench.get_config().rtol == 5e-3


def test_tf32_variant_sets_the_switch_in_setup_and_restores_it(interpreted: dict[str, ModuleType],
                                                               cpu_smoke: None) -> None:  # fmt: skip
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # whatever the caller had: teardown gives it back
    try:
        bench = interpreted["optimized_tensor_cores_tf32"].get_benchmark()
        bench.setup()
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cuda.matmul.allow_tf32
        bench.benchmark_fn()
        assert bench.get_output().dtype == torch.bfloat16
        base = interpreted["baseline_tensor_cores"].get_benchmark()
        base.setup()  # the baseline's own setting, inside the same process only in this test
        assert torch.get_float32_matmul_precision() == "highest"
        base_work = base.get_work()
        base.teardown()
        assert torch.get_float32_matmul_precision() == "high"
        assert bench.get_work() == {**base_work, "dtype": "tf32"} and "dtype" not in base_work
        bench.teardown()
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(before)


def test_kernels_compile_for_h100(compile_sm90: Callable[..., bytes]) -> None:
    """The chapter's kernels, as the GPU runs them (compiled-mode copies imported at collection)."""
    c = compiled_common
    assert compile_sm90(c.relax, {"src_ptr": "*fp32", "dst_ptr": "*fp32", "n": "i32", "c1": "fp32", "c2": "fp32"},
                        {"BLOCK": c.BLOCK})  # fmt: skip
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "per_program": "i32", "iters": "i32", "a": "fp32",
           "b": "fp32"}  # fmt: skip
    assert compile_sm90(c.iterate_range, sig, {"TILE": c.TILE}, num_warps=c.WAVE_WARPS)


def test_zero_copy_host_gather_delivers_the_picked_rows(cpu_smoke: None) -> None:
    """The baseline of zero_copy on a CPU (the optimized side needs a GPU): distinct picks, each row the table's."""
    from bench.define.protocol import load_benchmark
    from bench.errors import Skip

    bench = load_benchmark(CH02 / "baseline_zero_copy.py")
    bench.setup()
    try:
        bench.out.fill_(float("nan"))
        bench.benchmark_fn()
        idx = bench.idx.cpu()
        assert idx.unique().numel() == idx.numel() and idx.numel() < bench.table.shape[0]
        assert torch.equal(bench.get_output().cpu(), bench.table[idx])
        assert bench.get_work()["bytes"] == idx.numel() * (256 + 8)
    finally:
        bench.teardown()
    optimized = load_benchmark(CH02 / "optimized_zero_copy.py")
    if not torch.cuda.is_available():
        with pytest.raises(Skip):  # the kernel reads mapped host memory: a GPU's
            optimized.setup()


def test_zero_copy_baseline_sets_up_again(setup_again: Callable[[Path], None]) -> None:
    setup_again(CH02 / "baseline_zero_copy.py")
