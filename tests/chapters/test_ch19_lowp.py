"""Chapter 19: the quantisers and kernels against float64 or torch references on the CPU (Triton interpreted),
the accuracy bounds each pair declares, and the kernels compiled for an H100 (sm_90) without a GPU.

Shapes are awkward (one element, a row one past a power of two, partial K steps, cache lengths that end
mid-block and mid-chunk) so every mask is exercised; the harness's smoke run covers one shape per pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch
from triton_checks import compile_for_h100, needs_compiler, resources

import chapters.ch19.common as compiled  # at collection: compiled-mode kernels (for the sm_90 builds)
from bench.define.config import resolve_config
from bench.define.context import DeviceFacts, RunContext, make_context, set_context
from bench.errors import Skip
from chapters.ch19.training import RTOL_DYNAMIC

CHAPTER = CH19 = Path(__file__).resolve().parents[2] / "chapters" / "ch19"  # for the interpreted fixture
# The low-precision inference pairs' variants (dynamic_int8 and fp8_training: tests/chapters/test_ch19_training.py)
LOWP = ("fp8_gemm", "fp8_kv_cache", "int8_weight_only", "int4_weight_only", "fp8_quantize")
VARIANTS = sorted(p.stem for p in CH19.glob("*_*.py")
                  if p.stem.split("_")[0] in ("baseline", "optimized") and any(e in p.stem for e in LOWP))  # fmt: skip
FP8 = torch.float8_e4m3fn


def randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref64 = ref.double()
    return float((out.double() - ref64).norm() / ref64.norm())


# --- FP8 quantisation ------------------------------------------------------------------------------------


def test_every_e4m3_value_is_cast_to_itself(interpreted: dict[str, ModuleType]) -> None:
    """With max|x| = 448 the scale is 1: the kernel's cast alone, over every finite e4m3 value (subnormals,
    both zeros, ±448); the interpreter's own rounding would turn 7.95 into 4."""
    c = interpreted["common"]
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(FP8)
    values = codes.float()
    keep = ~torch.isnan(values)
    q, inv = torch.empty(int(keep.sum()), dtype=FP8), torch.empty(())
    c.quantize_tensor(values[keep], q, inv)
    assert torch.equal(q.view(torch.uint8), codes[keep].view(torch.uint8)) and float(inv) == 1.0


def test_tensor_cast_rounds_like_torch(interpreted: dict[str, ModuleType]) -> None:
    """Values spread over 2^-12 .. 2^8 (448 the max: scale 1): ties to even, carries into the exponent, the
    subnormal range, all as torch's cast rounds them."""
    c = interpreted["common"]
    spread = (randn(20000, seed=1) * torch.exp2(randn(20000, seed=2) * 4)).clamp_(-440.0, 440.0)
    x = torch.cat([spread, torch.tensor([448.0, -7.96875, 8.5, 9.5, 2.0**-10])])  # the max, a carry, two ties
    q, inv = torch.empty(x.numel(), dtype=FP8), torch.empty(())
    c.quantize_tensor(x, q, inv)
    assert torch.equal(q.view(torch.uint8), x.to(FP8).view(torch.uint8))


@pytest.mark.parametrize("shape", [(1, 1), (3, 100), (5, 1025), (2, 4096)])
def test_row_quantiser_equals_the_eager_one(interpreted: dict[str, ModuleType], shape: tuple[int, int]) -> None:
    """The fused kernel and the PyTorch operations give the same codes and scales, bit for bit; a zero row
    quantises to zeros, a row of tiny values uses the whole range."""
    c = interpreted["common"]
    x = randn(*shape, seed=shape[1], scale=3).bfloat16()
    if shape[0] > 2:
        x[1] = 0.0
        x[2] *= 1e-6
    m, k = shape
    fused, eager = (torch.empty(m, k, dtype=FP8), torch.empty(m)), (torch.empty(m, k, dtype=FP8), torch.empty(m))
    c.quantize_rows(x, *fused)
    c.quantize_rows_eager(x, *eager)
    assert torch.equal(fused[0].view(torch.uint8), eager[0].view(torch.uint8))
    assert torch.equal(fused[1], eager[1])
    amax = x.float().abs().amax(dim=1)
    assert torch.equal(fused[0].float().abs().amax(dim=1)[amax > 0], torch.full_like(amax[amax > 0], 448.0))
    assert rel(c.dequantize_rows(*fused), x.float()) < 0.04  # e4m3: half a step of 1/8 at most per value


def test_tensor_quantiser_matches_its_definition(interpreted: dict[str, ModuleType]) -> None:
    c = interpreted["common"]
    x = randn(37, 301, seed=5, scale=2).bfloat16()
    q, inv = torch.empty(37, 301, dtype=FP8), torch.empty(())
    c.quantize_tensor(x, q, inv)
    s = torch.full((), 448.0).div_(x.float().abs().amax())
    assert torch.equal(q.view(torch.uint8), (x.float() * s).to(FP8).view(torch.uint8))
    assert float(inv) == float(1.0 / s)


# --- fp8_gemm ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rowwise", [False, True])
def test_fp8_matmul_error_is_half_its_tolerance(interpreted: dict[str, ModuleType], rowwise: bool) -> None:
    """The declared rtol (0.08) against what FP8 costs at a larger size than the smoke run's: ~3.7 %."""
    c = interpreted["common"]
    m, n, k = 64, 96, 1024
    x, w = randn(m, k, seed=1).bfloat16(), randn(n, k, seed=2).bfloat16()
    xq, wq = torch.empty(m, k, dtype=FP8), torch.empty(n, k, dtype=FP8)
    if rowwise:
        xi, wi = torch.empty(m, 1), torch.empty(1, n)
        c.quantize_rows(x, xq, xi)
        c.quantize_rows(w, wq, wi)
    else:
        xi, wi = torch.empty(()), torch.empty(())
        c.quantize_tensor(x, xq, xi)
        c.quantize_tensor(w, wq, wi)
    out = torch._scaled_mm(xq, wq.t(), scale_a=xi, scale_b=wi, out_dtype=torch.bfloat16)
    err = rel(out, x.double() @ w.double().t())
    assert 0.02 < err < c.RTOL_FP8 / 2, err  # FP8 does cost precision; half the bound is left
    assert rel(out, x @ w.t()) < c.RTOL_FP8 / 2  # against the bf16 baseline, what the harness checks


def test_rowwise_scales_keep_a_quiet_row_precise(interpreted: dict[str, ModuleType]) -> None:
    """Why row-wise: a row 10^5 times smaller than the others keeps FP8's precision with its own scale and
    loses it with the tensor's (its values fall among e4m3's subnormals, steps of 2^-9). e4m3's normal range
    spans 2^15, so rows within ~10^4 of each other lose little either way."""
    c = interpreted["common"]
    x = randn(4, 512, seed=3).bfloat16()
    x[0] *= 1e-5
    per_row, per_tensor = (torch.empty(4, 512, dtype=FP8), torch.empty(4)), torch.empty(4, 512, dtype=FP8)
    c.quantize_rows(x, *per_row)
    inv = torch.empty(())
    c.quantize_tensor(x, per_tensor, inv)
    assert rel(c.dequantize_rows(*per_row)[0], x[0].float()) < 0.04
    assert rel(per_tensor[0].float() * inv, x[0].float()) > 0.2


# --- int8_weight_only ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n,k", [(1, 1), (17, 513), (70, 1100)])
def test_int8_gemv_matches_its_dequantised_weights(interpreted: dict[str, ModuleType], n: int, k: int) -> None:
    c = interpreted["common"]
    x, w = randn(1, k, seed=k).bfloat16(), randn(n, k, seed=n, scale=k**-0.5).bfloat16()
    wq, scale = c.quantize_int8_rows(w)
    assert wq.dtype == torch.int8 and int(wq.abs().max()) == 127  # every row's max lands on ±127
    out = torch.full((1, n), float("nan"), dtype=torch.bfloat16)
    c.int8_gemv(x, wq, scale, out)
    exact = x.double() @ (wq.double() * scale.double()[:, None]).t()
    # bf16 output rounding only; the interpreter truncates fp32 -> bf16 (a GPU rounds to nearest): one step, 2^-7
    assert rel(out, exact) < 8e-3
    if k > 1:
        assert rel(out, x.double() @ w.double().t()) < c.RTOL_INT8 / 2


def test_int8_error_at_the_full_inner_dimension(interpreted: dict[str, ModuleType]) -> None:
    c = interpreted["common"]
    x, w = randn(1, 8192, seed=1).bfloat16(), randn(256, 8192, seed=2, scale=8192**-0.5).bfloat16()
    wq, scale = c.quantize_int8_rows(w)
    out = torch.empty(1, 256, dtype=torch.bfloat16)
    c.int8_gemv(x, wq, scale, out)
    assert 0.003 < rel(out, x @ w.t()) < c.RTOL_INT8 / 2  # ~1 %


# --- int4_weight_only ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n,k", [(1, 128), (33, 384), (70, 1024)])
def test_int4_gemv_matches_its_dequantised_weights(interpreted: dict[str, ModuleType], n: int, k: int) -> None:
    c = interpreted["common"]
    x, w = randn(1, k, seed=k).bfloat16(), randn(n, k, seed=n, scale=k**-0.5).bfloat16()
    packed, scale = c.quantize_int4_groups(w)
    assert packed.shape == (n, k // 2) and scale.shape == (n, k // c.INT4_GROUP)
    codes = torch.stack(((packed & 0xF).int(), (packed >> 4).int()), dim=2).view(n, k) - 8
    assert int(codes.min()) >= -7 and int(codes.max()) <= 7 and int(codes.abs().view(n, -1, 128).amax(2).min()) == 7
    out = torch.full((1, n), float("nan"), dtype=torch.bfloat16)
    c.int4_gemv(x, packed, scale, out)
    exact = x.double() @ c.dequantize_int4_groups(packed, scale).double().t()
    assert rel(out, exact) < 8e-3  # bf16 output rounding (the interpreter truncates: one step, 2^-7)
    swapped = (packed >> 4) | (packed << 4)  # the nibbles' order matters: element 2j is the low one
    c.int4_gemv(x, swapped, scale, out)
    assert rel(out, exact) > 0.5


def test_int4_error_is_the_formats_and_within_its_tolerance(interpreted: dict[str, ModuleType]) -> None:
    c = interpreted["common"]
    x, w = randn(1, 8192, seed=1).bfloat16(), randn(256, 8192, seed=2, scale=8192**-0.5).bfloat16()
    packed, scale = c.quantize_int4_groups(w)
    assert 0.1 < rel(c.dequantize_int4_groups(packed, scale), w.double()) < 0.13  # ~11.7 %: step / sqrt(12)
    out = torch.empty(1, 256, dtype=torch.bfloat16)
    c.int4_gemv(x, packed, scale, out)
    assert 0.08 < rel(out, x @ w.t()) < 0.75 * c.RTOL_INT4


# --- dynamic_int8 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (37, 48, 300), (64, 130, 257), (65, 200, 1000)])
def test_int8_matmul_matches_its_codes_and_scales(interpreted: dict[str, ModuleType], m: int, n: int, k: int) -> None:
    """The activation quantiser equals torch's rounding of x / scale; the GEMM equals the dequantised product
    (tiles of 64 x 128 x 128 with ragged edges in every dimension)."""
    c = interpreted["common"]
    x, w = randn(m, k, seed=m + k).bfloat16(), randn(n, k, seed=n, scale=k**-0.5).bfloat16()
    wq, ws = c.quantize_int8_rows(w)
    xq, xs = torch.full((m, k), 99, dtype=torch.int8), torch.full((m,), float("nan"))
    c.quantize_int8_activations(x, xq, xs)
    expected_scale = x.abs().amax(1).float().clamp(min=c.TINY) / c.INT8_MAX
    assert torch.equal(xs, expected_scale)
    assert torch.equal(xq, torch.round(x.float() / expected_scale[:, None]).to(torch.int8))
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    c.int8_matmul(xq, wq, xs, ws, out)
    exact = (xq.double() * xs.double()[:, None]) @ (wq.double() * ws.double()[:, None]).t()
    assert rel(out, exact) < 8e-3  # bf16 output rounding (the interpreter truncates: one step, 2^-7)
    if k > 1:
        assert rel(out, x.double() @ w.double().t()) < RTOL_DYNAMIC / 2  # two int8 roundings: ~1 %


# --- fp8_kv_cache --------------------------------------------------------------------------------------


@pytest.mark.parametrize("s,chunk", [(1, 32), (33, 32), (300, 64), (129, 256)])
@pytest.mark.parametrize("fp8", [False, True])
def test_decode_attention_matches_float64(interpreted: dict[str, ModuleType], s: int, chunk: int, fp8: bool) -> None:
    """Against float64 attention over the cache's own values (codes times scale): the kernel's error only."""
    c = interpreted["common"]
    b, h, d = 2, 3, 32
    q, k, v = randn(b, h, d, seed=1), randn(b, h, s, d, seed=2), randn(b, h, s, d, seed=3, scale=2)
    ks = vs = 1.0
    if fp8:
        ks, vs = float(k.abs().max()) / 448, float(v.abs().max()) / 448
        k, v = (k / ks).to(FP8), (v / vs).to(FP8)
    else:
        k, v = k.bfloat16(), v.bfloat16()
    q = q.bfloat16()
    out = torch.full((b, h, d), float("nan"), dtype=torch.bfloat16)
    c.decode_attention(q, k, v, out, c.attention_scratch(b, h, s, d, chunk, torch.device("cpu")), ks, vs, chunk)
    scores = torch.einsum("bhd,bhsd->bhs", q.double(), k.double() * ks) / math.sqrt(d)
    ref = torch.einsum("bhs,bhsd->bhd", torch.softmax(scores, -1), v.double() * vs)
    assert rel(out, ref) < 5e-3


def test_fp8_cache_error_is_within_its_tolerance(interpreted: dict[str, ModuleType]) -> None:
    """An FP8 cache against bf16 at head dim 128 over 600 positions: ~3.5 %, under half the declared 0.08."""
    c = interpreted["common"]
    b, h, s, d = 1, 2, 600, 128
    q, k, v = randn(b, h, d, seed=4).bfloat16(), randn(b, h, s, d, seed=5), randn(b, h, s, d, seed=6)
    ks, vs = float(k.abs().max()) / 448, float(v.abs().max()) / 448
    scratch = c.attention_scratch(b, h, s, d, 256, torch.device("cpu"))
    bf16, fp8 = torch.empty(b, h, d, dtype=torch.bfloat16), torch.empty(b, h, d, dtype=torch.bfloat16)
    c.decode_attention(q, k.bfloat16(), v.bfloat16(), bf16, scratch)
    c.decode_attention(q, (k / ks).to(FP8), (v / vs).to(FP8), fp8, scratch, ks, vs)
    assert 0.01 < rel(fp8, bf16) < c.RTOL_FP8 / 2


def test_new_token_is_written_into_the_cache(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    """A call writes the new token's k and v at the last position (quantised with the cache's scales) and
    the output follows them: a changed v_new changes the output."""
    bench = interpreted["optimized_fp8_kv_cache"].get_benchmark()
    bench.setup()
    try:
        assert bench.k_cache.dtype == FP8
        last = bench.k_cache[:, :, -1].float() * bench.k_scale
        assert rel(last, bench.k_new.float()) < 0.04
        before = bench.out.clone()
        bench.v_new.mul_(-1.0)
        bench.benchmark_fn()
        assert rel(bench.out, before) > 1e-3
    finally:
        bench.teardown()


# --- the variants --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", [v for v in VARIANTS if "quantize" not in v])
def test_set_up_again_after_teardown(interpreted: dict[str, ModuleType], setup_again: Callable[[Path], None],
                                     variant: str) -> None:  # fmt: skip
    setup_again(CH19 / f"{variant}.py")


def test_quantize_sides_set_up_again(interpreted: dict[str, ModuleType], cpu_smoke: None) -> None:
    for side in ("baseline_fp8_quantize", "optimized_fp8_quantize"):
        bench = interpreted[side].get_benchmark()
        bench.setup()
        first = [t.float().clone() for t in bench.get_output()]
        bench.teardown()
        bench.setup()
        try:
            bench.q.view(torch.uint8).fill_(0x7F)  # NaN codes: the call must overwrite them
            bench.benchmark_fn()
            assert all(torch.equal(a.float(), b) for a, b in zip(bench.get_output(), first, strict=True))
        finally:
            bench.teardown()


def test_each_variant_records_its_error_and_each_optimized_side_its_tolerance(
    interpreted: dict[str, ModuleType],
) -> None:
    bounds = {"fp8_gemm": (0.02, 0.08), "fp8_kv_cache": (0.02, 0.08), "int8_weight_only": (0.003, 0.025),
              "int4_weight_only": (0.1, 0.2)}  # fmt: skip
    for stem in VARIANTS:
        ctx = make_context(resolve_config({"device": "cpu", "smoke": True}))
        set_context(ctx)
        bench = interpreted[stem].get_benchmark()
        try:
            bench.setup()
            err = ctx.sizes["rel_err_vs_fp32"]
        finally:
            bench.teardown()
            set_context(None)
        assert isinstance(err, float) and err > 0, stem
        example = next(e for e in LOWP if e in stem)
        if stem.startswith("optimized_"):
            rtol = bench.get_config().rtol
            assert rtol is not None, stem
            if example in bounds:
                lo, hi = bounds[example]
                assert lo < err < hi and rtol == hi, (stem, err, rtol)
        elif example != "fp8_quantize":
            assert err < 5e-3, (stem, err)  # bf16 inputs and output: a few ulps


@pytest.mark.parametrize("stem", ["optimized_fp8_gemm", "optimized_fp8_gemm_rowwise", "optimized_fp8_kv_cache"])
def test_fp8_variants_skip_on_a_gpu_without_fp8(interpreted: dict[str, ModuleType], stem: str) -> None:
    """Skipped with the reason before anything is allocated (this host has no GPU to allocate on)."""
    facts = DeviceFacts(name="NVIDIA A100-SXM4-80GB", memory_bytes=80 << 30, l2_bytes=40 << 20, cores=108,
                        capability=(8, 0))  # fmt: skip
    set_context(RunContext(torch.device("cuda", 0), 42, True, resolve_config({}), facts))
    try:
        with pytest.raises(Skip, match=r"compute capability 8\.9\+ \(NVIDIA A100-SXM4-80GB has 8\.0\)"):
            interpreted[stem].get_benchmark().setup()
    finally:
        set_context(None)


# --- compiled for sm_90 (no GPU needed) ----------------------------------------------------------------

BF16, F32 = torch.empty(16, dtype=torch.bfloat16), torch.empty(16)
F8, I8 = torch.empty(16, dtype=FP8), torch.empty(16, dtype=torch.int8)
U8 = torch.empty(16, dtype=torch.uint8)
BN, BK, STAGES, WARPS = compiled.GEMV_TILE
MM = compiled.INT8_MM_TILE
CHUNK, BLOCK_S, ATTN_WARPS, ATTN_STAGES = compiled.ATTN_TILE
KERNELS = [
    ("quantize_rows", compiled.quantize_rows_kernel, {"x_ptr": BF16, "q_ptr": F8, "inv_ptr": F32, "n_cols": 8192},
     {"BLOCK": 8192, "EXACT": False}, {"num_warps": compiled.row_warps(8192)}),
    ("quantize_tensor", compiled.quantize_tensor_kernel, {"x_ptr": BF16, "amax_ptr": BF16, "q_ptr": F8,
     "inv_ptr": F32, "n": 1 << 26}, {"BLOCK": compiled.TENSOR_BLOCK, "EXACT": False}, {"num_warps": 8}),
    ("quantize_int8_rows", compiled.quantize_int8_rows_kernel, {"x_ptr": BF16, "q_ptr": I8, "scale_ptr": F32,
     "n_cols": 8192}, {"BLOCK": 8192}, {"num_warps": compiled.row_warps(8192)}),
    ("int8_matmul", compiled.int8_matmul_kernel, {"x_ptr": I8, "w_ptr": I8, "xs_ptr": F32, "ws_ptr": F32,
     "out_ptr": BF16, "M": 64, "N": 28672, "K": 8192}, {"BLOCK_M": MM[0], "BLOCK_N": MM[1], "BLOCK_K": MM[2],
     "NUM_STAGES": MM[3]}, {"num_warps": MM[4]}),
    ("int4_gemv", compiled.int4_gemv_kernel, {"x_ptr": BF16, "w_ptr": U8, "scale_ptr": F32, "out_ptr": BF16,
     "N": 28672, "K": 8192}, {"BLOCK_N": compiled.INT4_TILE[0], "GROUP": 128, "HALF": 64,
     "NUM_STAGES": compiled.INT4_TILE[1]}, {"num_warps": compiled.INT4_TILE[2]}),
    ("int8_gemv", compiled.int8_gemv_kernel, {"x_ptr": BF16, "w_ptr": I8, "scale_ptr": F32, "out_ptr": BF16,
     "N": 28672, "K": 8192}, {"BLOCK_N": BN, "BLOCK_K": BK, "NUM_STAGES": STAGES}, {"num_warps": WARPS}),
    *[(f"decode_attention_{name}", compiled.decode_attention_kernel, {"q_ptr": BF16, "k_ptr": cache, "v_ptr": cache,
       "m_ptr": F32, "l_ptr": F32, "acc_ptr": F32, "S": 8192, "qk_scale": 0.1, "v_scale": 0.5},
      {"D": 128, "CHUNK": CHUNK, "BLOCK_S": BLOCK_S, "NUM_STAGES": ATTN_STAGES}, {"num_warps": ATTN_WARPS})
      for name, cache in (("bf16", BF16), ("fp8", F8))],
    ("combine", compiled.combine_kernel, {"m_ptr": F32, "l_ptr": F32, "acc_ptr": F32, "out_ptr": BF16,
     "n_splits": 32}, {"D": 128, "SPLITS": 32}, {"num_warps": 1}),
]  # fmt: skip


@needs_compiler
@pytest.mark.parametrize("name,kernel,args,constexprs,options", KERNELS, ids=[k[0] for k in KERNELS])
def test_kernel_compiles_for_h100_without_spills(name: str, kernel, args: dict, constexprs: dict,
                                                 options: dict) -> None:  # fmt: skip
    usage = resources(compile_for_h100(kernel, args, constexprs, **options))
    assert usage["STACK"] == 0, usage


@needs_compiler
def test_fp8_cast_is_the_hardware_instruction() -> None:
    """On sm_90 the cast is cvt.rn.satfinite (round to nearest even, saturating): what torch's cast and the
    interpreter-only rounding in round_e4m3 reproduce."""
    name, kernel, args, constexprs, options = KERNELS[0]
    ptx = compile_for_h100(kernel, args, constexprs, **options).asm["ptx"]
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx


@needs_compiler
def test_int8_matmul_runs_on_the_int8_tensor_cores() -> None:
    """On sm_90 the K loop is Hopper's warpgroup MMA on s8 codes with s32 accumulation (not a widening to fp32)."""
    name, kernel, args, constexprs, options = next(k for k in KERNELS if k[0] == "int8_matmul")
    ptx = compile_for_h100(kernel, args, constexprs, **options).asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" in ptx


@needs_compiler
def test_int4_gemv_widens_nibbles_without_a_conversion() -> None:
    """The nibbles become floats through the mantissa of 2^23 (an or and a subtraction), not through cvt.*.f32.s32
    or .u32 (a quarter-rate instruction on Hopper); the packed codes arrive by cp.async (the pipelined loads)."""
    name, kernel, args, constexprs, options = next(k for k in KERNELS if k[0] == "int4_gemv")
    ptx = compile_for_h100(kernel, args, constexprs, **options).asm["ptx"]
    assert not any(f"cvt.rn.f32.{t}" in ptx for t in ("s32", "u32", "s8", "u8", "s16", "u16"))
    assert "cp.async" in ptx
