"""The CUDA C++ pairs of issue 40's second round (ch06 managed_advice, ch07 vector_loads, ch08 unrolled_loads, ch09
register_tiling, ch10 warp_specialization, ch12 conditional_graph): on any host, what the compiled kernels must
contain for each pair's one idea to be there (PTX and ptxas's report for sm_90, through NVRTC); on a CUDA GPU, every
kernel against a reference at smoke size (tests/chapters/test_all_examples.py runs the pairs through the harness).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is in the test extra (pip install -e '.[test]')")

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the kernels run there)")


def entry(source, name: str) -> str:
    """The PTX of kernel ``name`` alone, compiled for sm_90."""
    ptx = source.compile("sm_90", "ptx").image.decode()
    start = ptx.index(f".entry {name}(")
    stop = ptx.find(".entry", start + 1)
    return ptx[start : stop if stop > 0 else None]


# --- compiled for sm_90 (no GPU needed) -------------------------------------------------------------------------


def test_the_specialized_stencil_hands_stages_over_with_mbarriers() -> None:
    """The producer's copies complete an mbarrier phase themselves (cp.async.mbarrier.arrive.noinc), the consumers
    wait on its parity and release the stage with an arrive: no named barrier, no block-wide one after the init."""
    from chapters.ch10.cuda_kernels import STAGES, STENCIL

    single, special = (entry(STENCIL, k) for k in ("stencil_single_role", "stencil_warp_specialized"))
    assert "mbarrier" not in single and "cp.async.wait_group 0" in single  # one tile, waited for in full
    assert "cp.async.mbarrier.arrive.noinc.shared::cta.b64" in special
    assert "mbarrier.try_wait.parity.shared::cta.b64" in special and "mbarrier.arrive.shared::cta.b64" in special
    assert "cp.async.ca.shared.global" in special  # the straddling chunk: 4-byte copies the mbarrier tracks
    assert "bar.arrive" not in special and len(re.findall(r"bar\.sync \t0;|barrier\.sync", special)) <= 1
    res = STENCIL.compile("sm_90").kernels
    barriers = 2 * STAGES * 8
    assert res["stencil_warp_specialized"].shared_bytes == STAGES * res["stencil_single_role"].shared_bytes + barriers


def test_the_vector_kernel_moves_16_bytes_per_access() -> None:
    from chapters.ch07.cuda_kernels import AFFINE_HALF

    scalar, vector = (entry(AFFINE_HALF, k) for k in ("affine_half", "affine_half8"))
    assert re.findall(r"(?:ld|st)\.global[.\w]*", scalar) == ["ld.global.nc.u16", "st.global.u16"]
    assert "ld.global.nc.v4.u32" in vector and "st.global.v4.u32" in vector


def test_the_unrolled_sum_has_eight_independent_loads_in_one_block() -> None:
    """The main loop's body is one basic block holding UNROLL loads whose addresses do not depend on the sums
    (ptxas issues them back to back); the rolled loop has one load per block: a load, its add, the branch."""
    from chapters.ch08.cuda_kernels import PARTIAL_SUMS, UNROLL

    def loads_per_block(ptx: str) -> list[int]:
        return [block.count("ld.global") for block in re.split(r"\n\$L__BB\d+_\d+:", ptx)]

    rolled, unrolled = (entry(PARTIAL_SUMS, k) for k in ("partial_sums_rolled", "partial_sums_unrolled"))
    assert rolled.count("ld.global") == 1 and max(loads_per_block(rolled)) == 1  # #pragma unroll 1
    assert UNROLL in loads_per_block(unrolled)


def test_register_tiling_holds_its_accumulators_in_registers() -> None:
    from chapters.ch09.cuda_kernels import GEMM, TS

    res = GEMM.compile("sm_90").kernels
    shared, tiled = res["gemm_shared"], res["gemm_tiled"]
    assert shared.shared_bytes == 2 * TS * TS * 4 and shared.spill_bytes == tiled.spill_bytes == 0
    assert tiled.registers >= 64 + 16 > 2 * shared.registers  # 64 accumulators and 16 operands per thread


def test_only_the_graph_check_sets_the_condition() -> None:
    from chapters.ch12.cuda_kernels import JACOBI

    assert "cudaGraphSetConditional" in entry(JACOBI, "jacobi_check_graph")
    assert "cudaGraphSetConditional" not in entry(JACOBI, "jacobi_check")


def jacobi_sweeps(b: torch.Tensor, tol: float, max_iters: int) -> tuple[torch.Tensor, int]:
    """The sweeps of jacobi.cu in fp32 on the CPU, in the kernel's order of operations: x and the sweep count."""
    x, zero, done = torch.zeros_like(b), torch.zeros(1), 0
    tol = float(torch.tensor(tol, dtype=torch.float32))  # the kernel compares with an fp32 tolerance
    while True:
        v = (b + torch.cat([zero, x[:-1]]) + torch.cat([x[1:], zero])) / torch.tensor(2.02)
        change, x, done = float((v - x).abs().max()), v, done + 1
        if not (change > tol and done < max_iters):  # jacobi.cu's advance()
            return x, done


def test_the_iteration_stops_by_convergence_long_before_its_cap() -> None:
    from chapters.ch12.cuda_kernels import MAX_ITERS, TOL

    b = torch.randn(1007, generator=torch.Generator().manual_seed(0))
    x, done = jacobi_sweeps(b, TOL, MAX_ITERS)
    assert 300 < done < MAX_ITERS // 2  # hundreds of host round trips in the baseline, and the cap never binds
    residual = 2.02 * x - torch.cat([torch.zeros(1), x[:-1]]) - torch.cat([x[1:], torch.zeros(1)]) - b
    assert float(residual.abs().max()) < 5 * TOL  # converged: the system holds to about the stop's size


# --- on a GPU: each kernel against a reference ----------------------------------------------------------------


@pytest.fixture
def smoke() -> Iterator[None]:
    set_context(make_context(resolve_config({"device": "cuda", "smoke": True})))
    yield
    set_context(None)


def run(bench) -> object:
    """One call of a set-up benchmark, its output poisoned first; the output as the call left it."""
    bench.setup()
    out = bench.get_output()
    for t in out if isinstance(out, tuple) else (out,):
        t.fill_(float("nan")) if t.is_floating_point() else t.fill_(-1)
    bench.benchmark_fn()
    torch.cuda.synchronize()
    return bench.get_output()


@GPU
@pytest.mark.parametrize("kernel", ["stencil_single_role", "stencil_warp_specialized"])
def test_stencils_match_a_convolution(smoke: None, kernel: str) -> None:
    from chapters.ch10.cuda_kernels import stencil

    bench = stencil(kernel)
    try:
        out = run(bench)
        (x,) = bench.args
        w = torch.tensor([1.0, 8, 28, 56, 70, 56, 28, 8, 1], dtype=torch.float64, device=x.device) / 256
        ref = torch.nn.functional.conv1d(x.double()[None, None], w[None, None], padding=4)[0, 0]
        assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5)
    finally:
        bench.teardown()


@GPU
@pytest.mark.parametrize("per_thread", [1, 8])
def test_half_affine_matches_torch(smoke: None, per_thread: int) -> None:
    from chapters.ch07.common import A, B
    from chapters.ch07.cuda_kernels import HalfAffine

    bench = HalfAffine(per_thread)
    try:
        out = run(bench)
        assert torch.equal(out, (bench.inp.float() * A + B).half())  # one rounding, as the kernel's cvt.rn
    finally:
        bench.teardown()


@GPU
@pytest.mark.parametrize("kernel", ["partial_sums_rolled", "partial_sums_unrolled"])
def test_partial_sums_add_up_to_the_total(smoke: None, kernel: str) -> None:
    from chapters.ch08.cuda_kernels import partial_sums

    bench = partial_sums(kernel)
    try:
        out = run(bench)
        (x,) = bench.args
        assert abs(float(out.double().sum()) - float(x.double().sum())) < 1e-3 * float(x.abs().sum())
    finally:
        bench.teardown()


@GPU
@pytest.mark.parametrize("kernel", ["gemm_shared", "gemm_tiled"])
def test_gemms_match_torch(smoke: None, kernel: str) -> None:
    from chapters.ch09.cuda_kernels import gemm

    bench = gemm(kernel)
    try:
        out = run(bench)
        a, b = bench.args
        ref = a.double() @ b.double()
        assert float((out.double() - ref).norm() / ref.norm()) < 1e-5
    finally:
        bench.teardown()


@GPU
def test_both_loops_stop_at_the_emulated_sweep_with_the_same_x(smoke: None) -> None:
    from chapters.ch12.cuda_kernels import MAX_ITERS, TOL, GraphLoop, HostLoop

    outs, counts = [], []
    for cls in (HostLoop, GraphLoop):
        bench = cls()
        try:
            outs.append(run(bench).cpu())
            counts.append(int(bench.state[0]))
            b = bench.b.cpu()
        finally:
            bench.teardown()
    x, done = jacobi_sweeps(b, TOL, MAX_ITERS)
    assert counts == [done, done]
    assert torch.equal(outs[0], outs[1]) and torch.allclose(outs[0], x, rtol=1e-5, atol=1e-5)


@GPU
@pytest.mark.parametrize("advise", [False, True])
def test_the_managed_table_is_read_by_both_processors(smoke: None, advise: bool) -> None:
    from chapters.ch06.cuda_kernels import ReadShared

    bench = ReadShared(advise)
    try:
        out, host_sum = run(bench)
        assert torch.equal(out.cpu(), bench.src * 2 + 1)
        assert float(host_sum) == pytest.approx(float(bench.src.double().sum()), rel=1e-9)
    finally:
        bench.teardown()


@GPU
def test_the_chain_follows_the_table_and_only_the_optimized_stream_is_favoured(smoke: None) -> None:
    import importlib

    outs, priorities = [], []
    for side in ("baseline", "optimized"):
        bench = importlib.import_module(f"chapters.ch11.{side}_stream_priorities").get_benchmark()
        try:
            outs.append(tuple(t.cpu() for t in run(bench)))
            priorities.append(bench.streams[1].priority)
            nxt, i = bench.next.cpu().long(), bench.start.cpu().long()
            for _ in range(bench.links * bench.hops):
                i = nxt[i]
        finally:
            bench.teardown()
    assert priorities[1] < priorities[0] == 0  # lower number, higher priority
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    assert torch.equal(outs[1][1][-1].long(), i)  # the last link ends where links x hops steps of the cycle lead


@GPU
@pytest.mark.parametrize("kernel", ["byte_histogram_global", "byte_histogram_shared"])
def test_byte_histograms_count_every_byte(smoke: None, kernel: str) -> None:
    from chapters.ch08.cuda_kernels import byte_histogram

    bench = byte_histogram(kernel)
    try:
        out = run(bench)
        (x,) = bench.args
        assert x.numel() % 16  # a tail after the 16-byte vectors
        assert torch.equal(out.long(), torch.bincount(x.long(), minlength=256))
    finally:
        bench.teardown()


@GPU
@pytest.mark.parametrize("kernel", ["histogram_global", "histogram_cluster"])
def test_histograms_count_every_value(smoke: None, kernel: str) -> None:
    from chapters.ch10.cuda_kernels import BINS, histogram

    bench = histogram(kernel)
    try:
        out = run(bench)
        (x,) = bench.args
        assert torch.equal(out.long(), torch.bincount(x.long(), minlength=BINS))
    finally:
        bench.teardown()


def test_the_histograms_values_follow_zipfs_law() -> None:
    """cluster_histogram's values: rank 0 takes 1 / H(32768) = 9.1 % of them, the first 32 ranks (one 128-byte line
    of counts) 37 %, the last rank 1 / 32768 of rank 0's share; the same values for the same seed."""
    from chapters.ch10.cuda_kernels import BINS, zipf

    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        x, again = zipf(1 << 20, BINS), zipf(1 << 20, BINS)
    finally:
        set_context(None)
    assert x.dtype == torch.int32 and torch.equal(x, again)
    assert int(x.min()) >= 0 and int(x.max()) < BINS
    counts = torch.bincount(x.long(), minlength=BINS).double() / x.numel()
    assert abs(float(counts[0]) - 0.0911) < 0.002 and abs(float(counts[:32].sum()) - 0.3698) < 0.003


def test_the_tensor_core_kernel_issues_mma_and_keeps_cuda_gemms_registers() -> None:
    from chapters.ch09.cuda_kernels import GEMM

    mma, simt = entry(GEMM, "gemm_mma_bf16"), entry(GEMM, "gemm_tiled_bf16")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in mma and "mma.sync" not in simt
    res = GEMM.compile("sm_90").kernels
    assert abs(res["gemm_tiled_bf16"].registers - res["gemm_tiled"].registers) <= 8  # one body, bf16 widened on load


@GPU
@pytest.mark.parametrize("kernel", ["gemm_tiled_bf16", "gemm_mma_bf16"])
def test_bf16_gemms_match_torch(smoke: None, kernel: str) -> None:
    from chapters.ch09.cuda_kernels import bf16_gemm

    bench = bf16_gemm(kernel)
    try:
        out = run(bench)
        a, b = bench.args
        ref = a.double() @ b.double()  # the bf16 values exactly; their products are exact in fp32
        assert float((out.double() - ref).norm() / ref.norm()) < 1e-5
    finally:
        bench.teardown()


@GPU
@pytest.mark.parametrize("placed", [False, True])
def test_the_cpu_reads_back_what_the_kernel_wrote(smoke: None, placed: bool) -> None:
    from chapters.ch06.cuda_kernels import SAMPLE_STRIDE, ReadBack

    bench = ReadBack(placed)
    try:
        host_sum, sample = run(bench)
        expected = bench.x.cpu() * 2 + 1
        assert float(host_sum) == pytest.approx(float(expected.double().sum()), rel=1e-9)
        assert torch.equal(sample, expected[::SAMPLE_STRIDE])
    finally:
        bench.teardown()


@GPU
@pytest.mark.parametrize("placed", [False, True])
def test_the_gather_reads_the_rows_the_cpu_wrote(smoke: None, placed: bool) -> None:
    from chapters.ch06.cuda_kernels import ROW_FLOATS, Placement

    bench = Placement(placed)
    try:
        out = run(bench)
        table = bench.src[: bench.table.size].reshape(-1, ROW_FLOATS).clone()
        table[torch.from_numpy(bench.updated)] = torch.from_numpy(bench.new_rows)
        assert torch.equal(out.cpu(), table[bench.idx.cpu().long()])
    finally:
        bench.teardown()
