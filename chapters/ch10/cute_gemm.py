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

    def teardown(self) -> None:
        del self.compiled, self.tensors
        super().teardown()


def library(a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor) -> None:
    """The same product through cuBLAS (fp16 in, fp32 accumulation, fp16 out): the library's tile."""
    torch.matmul(a, bt.t(), out=out)
