"""Chapter 10 kernels against float64 references (on the CPU through the Triton interpreter, and compiled
on a CUDA GPU when there is one), the double-buffered stream loop against the one-stream one, and the
kernels compiled for an H100 (sm_90) without a GPU.

Matmul shapes are awkward (partial tiles, a partial K step, several tiles per persistent program);
N and K stay multiples of 8, as a tensor descriptor's 16-byte-aligned strides require. The sm_90
compilations check what the interpreter cannot: the pipelining premise (cp.async only with stages),
TMA bulk copies in the descriptor kernel, and no spills in the persistent one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from triton_checks import MODES, Kernels, compile_for_h100, kernel_modes, needs_compiler, resources, variants

import chapters.ch08.common as C8  # compiled kernels (imported before the interpreter fixture swaps copies in)
import chapters.ch10.common as C
from bench.define.config import resolve_config
from bench.define.context import DeviceFacts, RunContext, make_context, set_context
from bench.errors import Skip

COMPILED_FILES = variants("ch10")  # compiled at collection (unless the whole process is interpreted)


@pytest.fixture(scope="module", params=MODES)
def load(request: pytest.FixtureRequest) -> Iterator[Kernels]:
    yield from kernel_modes(request.param, "ch10", ("chapters.ch08.common", "chapters.ch10.common"), COMPILED_FILES)


@pytest.fixture
def smoke(load: Kernels) -> Iterator[None]:
    """The harness's context at smoke size on the kernels' device."""
    set_context(make_context(resolve_config({"device": str(load.device), "smoke": True})))
    yield
    set_context(None)


def operands(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(m * n + k)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = (torch.randn(k, n, generator=gen) / math.sqrt(k)).bfloat16()
    return a, b, (a.double() @ b.double())


def product(k: Kernels, stem: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``stem``'s a @ b on k's device into a NaN-filled output (every element must be written), back on the CPU."""
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=torch.bfloat16, device=k.device)
    k[stem].get_benchmark().launch(a.to(k.device), b.to(k.device), out)
    return out.cpu()


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("pair", ["software_pipelining", "tma_loads", "persistent_tiles"])
@pytest.mark.parametrize("mnk", [(1, 8, 8), (37, 72, 40), (300, 520, 72)])
def test_matmul_pairs_match_reference(load: Kernels, pair: str, mnk: tuple[int, int, int]) -> None:
    a, b, ref = operands(*mnk)
    base = product(load, f"baseline_{pair}", a, b)
    opt = product(load, f"optimized_{pair}", a, b)
    assert rel_err(base, ref) < 4e-3 and rel_err(opt, ref) < 4e-3  # bf16 output rounding
    assert load.same(opt, base, rtol=1e-3)  # same tiles, same K order: only the schedule or the copy path differs


def test_persistent_programs_take_several_tiles(load: Kernels, smoke: None) -> None:
    """3 programs share the 9 tiles of the smoke size: each program's second and third tiles (the flattened
    loop's tile change, the separate store index) are exercised, not just one tile per program."""
    (a, b), _, _ = C.short_k_matmul()
    assert math.ceil(a.shape[0] / C.TILE[0]) * math.ceil(b.shape[1] / C.TILE[1]) == 9 and a.shape[1] % C.TILE[2]
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=torch.bfloat16, device=load.device)
    load["optimized_persistent_tiles"].persistent_matmul(programs=3)(a, b, out)
    assert rel_err(out.cpu(), a.cpu().double() @ b.cpu().double()) < 4e-3


def test_tma_variant_is_skipped_below_hopper(load: Kernels) -> None:
    facts = DeviceFacts(name="NVIDIA A100", memory_bytes=80 * 2**30, l2_bytes=40 * 2**20, cores=108,
                        capability=(8, 0))  # fmt: skip
    ctx = RunContext(device=torch.device("cuda", 0), seed=0, smoke=True, config=resolve_config(), facts=facts)
    set_context(ctx)
    try:
        with pytest.raises(Skip, match=r"compute capability 9\.0\+ \(NVIDIA A100 has 8\.0\)"):
            load["optimized_tma_loads"].get_benchmark().setup()
    finally:
        set_context(None)


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_h2d_streams_match_reference(load: Kernels, smoke: None, variant: str) -> None:
    bench = load[f"{variant}_h2d_double_buffering"].get_benchmark()
    bench.setup()
    try:
        assert len(bench.chunks()) == 3 and bench.host_x.shape[0] % bench.chunk  # a partial last chunk
        bench.out.fill_(float("nan"))
        bench.benchmark_fn()
        ref = bench.host_x.double() @ bench.w.cpu().double()
        assert rel_err(bench.get_output().cpu(), ref) < 4e-3
        assert bench.get_work()["flops"] == 2 * bench.host_x.shape[0] * bench.w.numel()
    finally:
        bench.teardown()


# --- compiled for sm_90 (no GPU needed) ---------------------------------------------------------

BF16 = torch.empty(64, 64, dtype=torch.bfloat16)
SIZES = {"M": 8192, "N": 8192, "K": 8192}
CONSTS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "UPCAST": False}


@needs_compiler
def test_pipelining_premise_on_h100() -> None:
    """num_stages=1 compiles to plain loads and one 48 KiB buffer; 4 stages to cp.async and four buffers."""
    args = {"a_ptr": BF16, "b_ptr": BF16, "c_ptr": BF16, "bias_ptr": BF16, **SIZES}
    consts = {**CONSTS, "BIAS_GELU": False}
    one = compile_for_h100(C8.matmul_kernel, args, consts, num_warps=8, num_stages=1)
    four = compile_for_h100(C8.matmul_kernel, args, consts, num_warps=8, num_stages=4)
    assert "cp.async" not in one.asm["ptx"] and one.metadata.shared == 48 * 1024
    assert "cp.async" in four.asm["ptx"] and four.metadata.shared == 4 * 48 * 1024
    assert resources(one)["STACK"] == 0 and resources(four)["STACK"] == 0


@needs_compiler
def test_tma_kernel_uses_bulk_tensor_copies_on_h100() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    descs = {
        "a_desc": TensorDescriptor.from_tensor(BF16, [128, 64]),
        "b_desc": TensorDescriptor.from_tensor(BF16, [64, 256]),
        "c_desc": TensorDescriptor.from_tensor(BF16, [128, 256]),
    }
    compiled = compile_for_h100(C.matmul_tma_kernel, {**descs, **SIZES}, CONSTS, num_warps=8, num_stages=4)
    assert "cp.async.bulk.tensor" in compiled.asm["ptx"]  # TMA loads (and the TMA store)
    assert resources(compiled)["STACK"] == 0


@needs_compiler
def test_persistent_kernel_compiles_without_spills_on_h100() -> None:
    args = {"a_ptr": BF16, "b_ptr": BF16, "c_ptr": BF16, "M": 16384, "N": 16384, "K": 512}
    compiled = compile_for_h100(C.matmul_persistent_kernel, args, CONSTS, num_warps=8, num_stages=3)
    assert resources(compiled)["STACK"] == 0
    # The flattened loop is pipelined: at least the per-tile kernel's three stages of 48 KiB (a first
    # version that computed its addresses from k inside the loop got only 80 KiB of shared memory).
    assert "cp.async" in compiled.asm["ptx"] and compiled.metadata.shared >= 3 * 48 * 1024


@needs_compiler
def test_variant_files_use_the_compiled_kernels() -> None:
    """The files' launches resolve to the kernels compiled above (no stray copy of a kernel in a file)."""
    assert COMPILED_FILES["optimized_tma_loads"].tma_matmul.__module__ == "chapters.ch10.common"
    assert COMPILED_FILES["optimized_persistent_tiles"].persistent_matmul is C.persistent_matmul
