"""Chapter 9 kernels against float64 references: on the CPU through the Triton interpreter, on a CUDA GPU
compiled (when there is one), and compiled for an H100 without a GPU.

Shapes are awkward (1 element, one past a block, partial tiles and a partial K step) so every mask
is exercised; the harness's smoke run covers one shape per example.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from triton_checks import MODES, Kernels, compile_for_h100, kernel_modes, needs_compiler, resources, variants

import chapters.ch08.common as C8  # compiled kernels (imported before the interpreter fixture swaps copies in)
import chapters.ch09.common as C
from bench.define.config import resolve_config
from bench.define.context import make_context, set_context

COMPILED_FILES = variants("ch09")  # compiled at collection (unless the whole process is interpreted)


@pytest.fixture(scope="module", params=MODES)
def load(request: pytest.FixtureRequest) -> Iterator[Kernels]:
    yield from kernel_modes(request.param, "ch09", ("chapters.ch08.common", "chapters.ch09.common"), COMPILED_FILES)


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


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("n", [1, 1025, 3 * 1024 + 7])
def test_elementwise_chain_matches_gelu(load: Kernels, variant: str, n: int) -> None:
    x = 2 * randn(n, seed=n)
    out = run(load, f"{variant}_elementwise_chain", x, out=torch.empty(n))
    x64 = x.double()
    ref = 0.5 * x64 * (1 + torch.tanh(C.GELU_C * (x64 + C.GELU_K * x64**3)))
    assert rel_err(out, ref) < 1e-6


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (37, 45, 40), (130, 260, 72)])
def test_epilogue_fusion_matches_reference(load: Kernels, variant: str, mnk: tuple) -> None:
    m, n, k = mnk
    a, w = randn(m, k, seed=m).bfloat16(), (randn(k, n, seed=n) / math.sqrt(k)).bfloat16()
    b = (0.5 * randn(n, seed=k)).bfloat16()
    out = run(load, f"{variant}_epilogue_fusion", a, w, b, out=torch.empty(m, n, dtype=torch.bfloat16))
    ref = torch.nn.functional.gelu(a.double() @ w.double() + b.double())
    assert rel_err(out, ref) < 1e-2  # bf16 output; the baseline rounds the product three times


@pytest.mark.parametrize("shape", [(1, 1), (3, 100), (2, 4097)])
def test_tiled_reduction_matches_softmax(load: Kernels, shape: tuple[int, int]) -> None:
    x = 3 * randn(*shape, seed=shape[1])
    three = run(load, "baseline_tiled_reduction", x, out=torch.empty(shape))
    one = run(load, "optimized_tiled_reduction", x, out=torch.empty(shape))
    assert rel_err(three, torch.softmax(x.double(), dim=1)) < 2e-5  # fp32 sums of up to 4097 terms
    assert load.same(one, three, rtol=1e-6)  # the same exps and sums: only the passes differ


# 2 x 1025: one program per row of a 2048-wide block, 4 warps on a GPU (2050 rows take the interpreter a minute)
@pytest.mark.parametrize("heads,seq", [(1, 1), (3, 37), pytest.param(2, 1025, marks=pytest.mark.slow)])
def test_recompute_bias_matches_reference(load: Kernels, heads: int, seq: int) -> None:
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        slopes = C.alibi_slopes(heads)
        bias = C.alibi_bias(slopes, seq)
    finally:
        set_context(None)
    scores, scale = randn(heads, seq, seq, seed=seq), 0.125
    stored = run(load, "baseline_recompute_bias", scores, scale, slopes, bias, out=torch.empty_like(scores))
    recomputed = run(load, "optimized_recompute_bias", scores, scale, slopes, None, out=torch.empty_like(scores))
    pos = torch.arange(seq, dtype=torch.float64)
    ref = scores.double() * scale + slopes.double()[:, None, None] * (pos[None, None, :] - pos[None, :, None])
    assert rel_err(stored, ref) < 1e-6 and rel_err(recomputed, ref) < 1e-6


def test_alibi_slopes_and_bias() -> None:
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        slopes = C.alibi_slopes(8)
        bias = C.alibi_bias(slopes, 5)
        (scores, _, _, stored), out, work = C.alibi_logits(stored=True)
        (_, _, _, none), _, work_r = C.alibi_logits(stored=False)
    finally:
        set_context(None)
    assert torch.allclose(slopes, torch.tensor([2.0 ** (-h) for h in range(1, 9)]))  # 2^(-8h/8)
    assert bias[3, 1, 4] == slopes[3] * 3 and bias[0, 4, 0] == slopes[0] * -4
    assert stored.shape == scores.shape and none is None and work == work_r  # same minimum work both ways


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
@pytest.mark.parametrize("mnk", [(37, 45, 40), (130, 260, 72), (65, 129, 136)])
def test_tile_intensity_matmul_matches_reference(load: Kernels, variant: str, mnk: tuple) -> None:
    m, n, k = mnk
    a, b = randn(m, k, seed=m).bfloat16(), randn(k, n, seed=n).bfloat16()
    out = run(load, f"{variant}_tile_intensity", a, b, out=torch.empty(m, n, dtype=torch.bfloat16))
    assert rel_err(out, a.double() @ b.double()) < 4e-3


@pytest.mark.parametrize("batch,n,k", [(1, 1, 1), (5, 45, 40), (3, 130, 257)])
def test_batched_matvec_matches_reference(load: Kernels, batch: int, n: int, k: int) -> None:
    x, w = randn(batch, k, seed=k).bfloat16(), (randn(n, k, seed=n) / math.sqrt(k)).bfloat16()
    one_by_one, stacked = (
        run(load, f"{v}_batched_matvec", x, w, out=torch.empty(batch, n, dtype=torch.bfloat16))
        for v in ("baseline", "optimized")
    )
    ref = x.double() @ w.double().t()
    assert rel_err(one_by_one, ref) < 4e-3 and rel_err(stacked, ref) < 4e-3  # bf16 outputs: 2^-9 at most


class MatmulCalls(TorchDispatchMode):
    """The matrix products a call dispatches (ATen op names), whatever the device."""

    PRODUCTS = {"mv", "mm", "addmv", "addmm", "bmm", "baddbmm"}

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func.overloadpacket.__name__ in self.PRODUCTS:
            self.calls.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("variant,calls", [("baseline", ["mv"] * 5), ("optimized", ["mm"])])
def test_batched_matvec_reads_the_weight_once_per_product(variant: str, calls: list[str]) -> None:
    """The pair's premise: the baseline issues one matrix-vector product per vector (each reads all of W),
    the optimized side one matrix product for the batch."""
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    bench = COMPILED_FILES[f"{variant}_batched_matvec"].get_benchmark()
    try:
        bench.setup()
        assert bench.args[0].shape[0] == 5  # the smoke batch
        with MatmulCalls() as seen:
            bench.benchmark_fn()
    finally:
        bench.teardown()
        set_context(None)
    assert seen.calls == calls


# --- compiled for sm_90 (no GPU needed) ---------------------------------------------------------

BF16 = torch.empty(16, dtype=torch.bfloat16)
FP32 = torch.empty(16)
ROWS = {"n_cols": 4096}
ROW = ({"BLOCK": 4096}, {"num_warps": 8})  # one program per 4096-wide row
KERNELS = [
    ("optimized_elementwise_chain", "gelu_tanh", {"x_ptr": FP32, "out_ptr": FP32, "n": 50 * 2**20, "c": 0.5, "k": 0.5},
     {"BLOCK": 1024}, {"num_warps": 4}),
    ("baseline_tiled_reduction", "row_max", {"x_ptr": FP32, "max_ptr": FP32, **ROWS}, *ROW),
    ("baseline_tiled_reduction", "row_sum_exp", {"x_ptr": FP32, "max_ptr": FP32, "sum_ptr": FP32, **ROWS}, *ROW),
    ("baseline_tiled_reduction", "normalize", {"x_ptr": FP32, "max_ptr": FP32, "sum_ptr": FP32, "out_ptr": FP32,
                                               **ROWS}, *ROW),
    ("optimized_tiled_reduction", "softmax_rows", {"x_ptr": FP32, "out_ptr": FP32, **ROWS}, *ROW),
    ("baseline_recompute_bias", "logits_stored_bias", {"s_ptr": FP32, "bias_ptr": FP32, "out_ptr": FP32, "seq": 1760,
     "scale": 0.1}, {"BLOCK": 1024}, {"num_warps": 4}),
    ("optimized_recompute_bias", "logits_alibi", {"s_ptr": FP32, "slopes_ptr": FP32, "out_ptr": FP32, "seq": 1760,
     "scale": 0.1}, {"BLOCK": 1024}, {"num_warps": 4}),
]  # fmt: skip


@needs_compiler
@pytest.mark.parametrize("stem,name,args,constexprs,options", KERNELS, ids=[f"{k[0]}.{k[1]}" for k in KERNELS])
def test_kernel_compiles_for_h100(stem: str, name: str, args: dict, constexprs: dict, options: dict) -> None:
    assert compile_for_h100(getattr(COMPILED_FILES[stem], name), args, constexprs, **options)


@needs_compiler
@pytest.mark.parametrize("tile,warps,bias_gelu", [((64, 64, 64), 4, False), ((128, 128, 64), 8, True)])
def test_matmul_configurations_compile_without_spills(tile: tuple[int, int, int], warps: int, bias_gelu: bool) -> None:
    """tile_intensity's small tiles, and epilogue_fusion's fused epilogue (whose erf GELU spills a
    128 x 256 tile on 8 warps): both must keep their accumulators in registers on sm_90."""
    args = {"a_ptr": BF16, "b_ptr": BF16, "c_ptr": BF16, "bias_ptr": BF16, "M": 16384, "N": 4096, "K": 2048}
    consts = {"BLOCK_M": tile[0], "BLOCK_N": tile[1], "BLOCK_K": tile[2], "GROUP_M": 8, "BIAS_GELU": bias_gelu,
              "UPCAST": False}  # fmt: skip
    usage = resources(compile_for_h100(C8.matmul_kernel, args, consts, num_warps=warps, num_stages=3))
    assert usage["STACK"] == 0, usage


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_recompute_bias_inputs_are_the_scores_only(variant: str) -> None:
    """The harness changes a benchmark's inputs to see its output follow, and both sides must then agree:
    the stored bias (baseline) and the slopes (optimized) are constants, so only the scores may change."""
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    bench = COMPILED_FILES[f"{variant}_recompute_bias"].get_benchmark()
    try:
        bench.setup()
        (inputs,) = bench.get_inputs()
        assert inputs is bench.args[0] and inputs.dim() == 3
    finally:
        bench.teardown()
        set_context(None)
