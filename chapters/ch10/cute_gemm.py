"""Chapter 10's CuTe DSL GEMM (NVIDIA's CUTLASS Python DSL, ``nvidia-cutlass-dsl``): fp16 C = A @ Bᵀ on Hopper,
A and B brought into shared memory by TMA (the bulk tensor copy engine, one thread issues a whole tile), the
products by wgmma (a warpgroup of 128 threads multiplies operands read straight from shared memory), the
stages of shared memory handed between the copy engine and the tensor cores through mbarriers
(``cutlass.pipeline.PipelineTmaAsync``).

Three knobs make the chapter's pairs, one idea each: ``stages`` (shared-memory buffers in flight) with
``mmas_in_flight`` (wgmma batches left running while the next tile is awaited), and the CTA tile (``tile_mn``).
The epilogue converts the fp32 accumulators to fp16 and stores them from registers, the same on every variant.

The DSL compiles a kernel for ``CUTE_DSL_ARCH`` (sm_90a here) without a GPU: the tests compile every variant on
any host where the DSL is installed (tests/chapters/test_cute_gemm.py). The GPU host has no network and takes
64 MiB a call; ``scripts/cutlass_bundle.sh`` and the ``cutlass`` steps of ``scripts/gpu_session.sh`` bring it
(chapter README). A variant skips, with the reason, where the DSL is missing or there is no sm_90 GPU.

``python3 -m chapters.ch10.cute_gemm --check`` (on the Hopper host, the DSL installed) launches each of the six
kernels once on an output filled with NaN, at the smoke size and a mid size, and prints one line each: the NaN
left, the largest error against an fp32 ``torch.matmul``, PASS or FAIL (``--size MxNxK`` for other sizes).
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from bench import context
from chapters.ch01.common import Example, Inputs, randn
from chapters.ch10.cute_config import ARCH, Config


def dsl() -> Any:
    """The DSL's modules, or the variant skips with the reason (not installed; the import's own error)."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)  # read once, when the DSL is first imported
    try:
        import cutlass  # noqa: F401
    except ImportError as e:
        context().skip(f"needs NVIDIA's CUTLASS Python DSL (pip install nvidia-cutlass-dsl[cu13]): {e}")
    from chapters.ch10 import cute_kernel

    return cute_kernel


def gemm_operands() -> Inputs:
    """fp16 A (M x K) ~ N(0, 1) and Bᵀ (N x K) ~ N(0, 1/K), both K-contiguous as wgmma reads them; C = A @ B is O(1).

    8192³ (1.1 TFLOP; 384 MiB moved at least); smoke 256 x 256 x 192: sizes are whole tiles (the epilogue
    stores full tiles), three K steps.
    """
    m, n, k = context().size((8192, 8192, 8192), (256, 256, 192))
    a = randn(m, k, offset=0).half()
    bt = randn(n, k, offset=1, scale=1 / math.sqrt(k)).half()
    out = torch.empty(m, n, device=a.device, dtype=torch.float16)
    return (a, bt), out, {"bytes": 2 * (m * k + n * k + m * n), "flops": 2 * m * n * k}


class CuteGemm(Example):
    """A variant: setup() needs an sm_90 GPU and the DSL, compiles ``config``'s kernel for these operands (the JIT
    time stays out of the samples), then each call launches it on the current stream."""

    def __init__(self, config: Config) -> None:
        config.check()
        super().__init__(gemm_operands, self._launch)
        self.kernel_config = config

    def setup(self) -> None:
        ctx = context()
        ctx.require(cuda=True, capability=(9, 0))
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) != (9, 0):
            ctx.skip(f"wgmma and TMA of sm_90a run on Hopper (sm_90) only; this GPU is sm_{major}{minor}")
        kernel = dsl()
        super().setup()
        a, bt = self.args
        self.compiled, self.tensors = kernel.compile_gemm(self.kernel_config, a, bt, self.out)

    def _launch(self, a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor) -> None:
        from cuda.bindings import driver

        self.compiled(*self.tensors, driver.CUstream(torch.cuda.current_stream().cuda_stream))

    def validate_result(self) -> str | None:
        """The last timed call's C against an fp32 ``torch.matmul`` of the same fp16 operands, at the tolerance of
        ``--check``: both sides of a pair could agree on a wrong C (the harness compares them with each other)."""
        a, bt = self.args
        nans, err = error(self.out, a.float() @ bt.float().t())
        if nans or err > CHECK_TOLERANCE:
            return (
                f"C against an fp32 torch.matmul: {nans} NaN, max abs err {err:.2e} (tolerance "
                f"{CHECK_TOLERANCE:.0e} on an O(1) C)"
            )
        return None

    def teardown(self) -> None:
        del self.compiled, self.tensors
        super().teardown()


def library(a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor) -> None:
    """The same product through cuBLAS (fp16 in, fp32 accumulation, fp16 out): the library's tile."""
    torch.matmul(a, bt.t(), out=out)


# --check: every variant's kernel once on NaN-filled output, against an fp32 product; seconds on an H200.
CHECK_CONFIGS = (  # the six kernels of the three pairs
    Config(tile_mn=(128, 256), stages=1, mmas_in_flight=0),  # cute_tma_pipeline's baseline
    Config(tile_mn=(128, 256), stages=4, mmas_in_flight=0),  # cute_tma_pipeline's optimized
    Config(tile_mn=(128, 128), stages=4, mmas_in_flight=0),  # cute_wgmma_async's baseline (one warpgroup)
    Config(tile_mn=(128, 128), stages=4, mmas_in_flight=1),  # cute_wgmma_async's optimized
    Config(tile_mn=(64, 128), stages=4, mmas_in_flight=1),  # cute_wgmma_tile's baseline
    Config(tile_mn=(128, 256), stages=4, mmas_in_flight=1),  # cute_wgmma_tile's optimized
)
CHECK_SIZES = ((256, 256, 192), (1024, 1536, 2048))  # smoke; mid (M != N: a transposed store shows)
CHECK_TOLERANCE = 2e-2  # max |C - C_fp32| on an O(1) C: fp16 rounding of the output is under 4e-3


def error(out: torch.Tensor, ref: torch.Tensor) -> tuple[int, float]:
    """NaNs in ``out`` and its largest absolute difference from ``ref`` elsewhere."""
    nan = out.isnan()
    return int(nan.sum()), (out.float() - ref).abs().masked_fill(nan, 0).max().item()


def check_one(cute_kernel: Any, cfg: Config, a: torch.Tensor, bt: torch.Tensor, ref: torch.Tensor) -> bool:
    """One launch of ``cfg``'s kernel on an output filled with NaN: one line (NaNs left, max error, PASS/FAIL)."""
    import time

    m, n = ref.shape
    label = (
        f"{m}x{n}x{a.shape[1]} tile {cfg.tile_mn[0]}x{cfg.tile_mn[1]} stages {cfg.stages} in_flight "
        f"{cfg.mmas_in_flight}"
    )
    print(f"{label}: ", end="", flush=True)  # a hang shows which kernel
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=a.device)
    try:
        start = time.perf_counter()
        compiled, tensors = cute_kernel.compile_gemm(cfg, a, bt, out)
        compile_s = time.perf_counter() - start
        if a.is_cuda:
            from cuda.bindings import driver

            compiled(*tensors, driver.CUstream(torch.cuda.current_stream().cuda_stream))
            torch.cuda.synchronize()
        else:  # the tests' stand-in kernels
            compiled(*tensors, None)
    except Exception as e:  # one line a kernel: the others still run
        print(f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}: FAIL")
        return False
    nans, err = error(out, ref)
    nan = out.isnan()
    where = ""
    if nans:
        row, col = nan.nonzero()[0].tolist()
        rows, cols = int(nan.any(1).sum()), int(nan.any(0).sum())
        where = f" (first at row {row} col {col}; in {rows}/{m} rows, {cols}/{n} cols)"
    ok = nans == 0 and err <= CHECK_TOLERANCE
    print(
        f"NaN {nans}/{m * n}{where}, max abs err {err:.2e} (tol {CHECK_TOLERANCE:.0e}), "
        f"compile {compile_s:.1f} s: {'PASS' if ok else 'FAIL'}",
        flush=True,
    )
    return ok


def check(sizes: tuple[tuple[int, int, int], ...] = CHECK_SIZES) -> bool:
    """Each of CHECK_CONFIGS at each size, one line each; True where all pass. Needs an sm_90 GPU and the DSL."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("--check launches the kernels: it needs an sm_90 (Hopper) GPU")
        return False
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    try:
        from chapters.ch10 import cute_kernel
    except ImportError as e:
        print(f"--check needs NVIDIA's CUTLASS Python DSL (pip install nvidia-cutlass-dsl[cu13]): {e}")
        return False
    ok = True
    for m, n, k in sizes:
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, generator=gen, device="cuda").half()
        bt = torch.randn(n, k, generator=gen, device="cuda").div_(math.sqrt(k)).half()
        ref = a.float() @ bt.float().t()
        for cfg in CHECK_CONFIGS:
            ok &= check_one(cute_kernel, cfg, a, bt, ref)
    print("all PASS" if ok else "some FAIL")
    return ok


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python3 -m chapters.ch10.cute_gemm", description="Chapter 10's CuTe DSL GEMM kernels"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="launch each variant's kernel once on NaN-filled "
        "output and compare with an fp32 torch.matmul: one line a kernel and size",
    )
    parser.add_argument(
        "--size",
        action="append",
        metavar="MxNxK",
        help=f"instead of the smoke and mid sizes {', '.join('x'.join(map(str, s)) for s in CHECK_SIZES)} (repeatable)",
    )
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 2
    sizes = tuple(tuple(int(x) for x in s.split("x")) for s in args.size) if args.size else CHECK_SIZES
    return 0 if check(sizes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
