"""What the CPU interpreter cannot show: every kernel compiles for an H100 (sm_90, no GPU needed), and on
a GPU every case matches its reference, forward and backward, at the issue's three configurations and
an awkward shape, in every dtype (no interpreter there, so bf16 add_rms is checked too)."""

from __future__ import annotations

import os

import pytest
import torch
import triton

import kernels.polynorm as P
import kernels.rmsnorm as R
from kernels.case import DTYPES, Case
from kernels.check import check
from kernels.sweep import CHECK_SHAPES

pytestmark = pytest.mark.slow  # GPU-shaped: compiled for an H100, or run on a GPU

# Imported at collection, before tests/kernels/conftest.py's fixture swaps in interpreter copies: these
# are compiled kernels unless the whole process runs under TRITON_INTERPRET=1.
COMPILED = os.environ.get("TRITON_INTERPRET") != "1"
CASES: list[Case] = [R.RMSNormCase(), R.AddRMSNormCase(), P.PolyNormCase(), P.MulPolyNormCase(),
                     P.GroupedMulPolyNormCase()]  # fmt: skip


def _kernel(kernel: triton.JITFunction, pointers: dict[str, str], **constexprs: object) -> object:
    flags = "".join(f"-{k}={int(v)}" for k, v in constexprs.items() if isinstance(v, bool))
    return pytest.param(kernel, pointers, constexprs, id=f"{kernel.__module__.split('.')[-1]}.{kernel.__name__}{flags}")


# (kernel, pointer dtypes other than bf16 by argument name, constexprs); sizes are i32, eps fp32.
KERNELS = [
    _kernel(R._fwd_kernel, {"RSTD": "fp32"}, BLOCK=4096, HAS_RES=True),
    _kernel(R._bwd_kernel, {"RSTD": "fp32", "DW": "fp32"}, BLOCK=4096, HAS_DS=True),
    *(_kernel(P._fwd_kernel, {"RSTD": "fp32", "OFFS": "i32"}, BLOCK=2048, EBLOCK=64, HAS_MUL=m, GROUPED=g)
      for m in (False, True) for g in (False, True)),
    *(_kernel(P._bwd_kernel, {"RSTD": "fp32", "OFFS": "i32", "PART": "fp32"}, BLOCK=2048, EBLOCK=64, HAS_MUL=m,
              GROUPED=g) for m in (False, True) for g in (False, True)),
    _kernel(P._segment_sum_kernel, {"PART": "fp32", "OFFS": "i32", "OUT": "fp32"}, ROWS=128),
]  # fmt: skip


@pytest.mark.skipif(not COMPILED, reason="the process runs under TRITON_INTERPRET=1: no compiled kernels")
@pytest.mark.parametrize("kernel,pointers,constexprs", KERNELS)
def test_kernel_compiles_for_h100(kernel: triton.JITFunction, pointers: dict[str, str],
                                  constexprs: dict[str, object]) -> None:  # fmt: skip
    """Triton's front end and ptxas for sm_90, bf16 activations: the interpreter accepts code that the
    compiler rejects (e.g. a Python feature outside Triton's subset)."""
    pytest.importorskip("triton.backends.nvidia")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def arg_type(name: str) -> str:
        if name in constexprs:
            return "constexpr"
        if name in ("N", "M", "E", "rows_per_program"):
            return "i32"
        return "fp32" if name == "eps" else "*" + pointers.get(name, "bf16")

    signature = {name: arg_type(name) for name in kernel.arg_names}
    compiled = triton.compile(ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 8})  # fmt: skip
    assert compiled.asm.get("cubin")


@pytest.mark.skipif(not (COMPILED and torch.cuda.is_available()), reason="needs a CUDA GPU (and compiled kernels)")
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", CHECK_SHAPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_issue_configurations_on_gpu(case: Case, shape: object, dtype: str) -> None:
    result = check(case, "triton", shape, DTYPES[dtype], torch.device("cuda"), seed=7)  # type: ignore[arg-type]
    assert result.ok, str(result)
