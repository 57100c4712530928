"""Honest: the matmul on FP8 tensor cores with the lower precision declared (rtol 0.08, ~2x the ~3.7 % an
e4m3 product carries). Precision may be the optimization; it must be said.

Expected verdict: ok, verified (the relative error is logged beside the declared rtol). Its speed is not the
point: quantising both operands in PyTorch operations every call costs more than FP8 saves here (chapter 19
does it properly). Needs compute capability 8.9+ on a GPU.
"""

from bench import BenchmarkConfig
from chapters.ch20.fakes.ch91.optimized_matmul_fp8 import Fp8


class Fp8Declared(Fp8):
    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(rtol=0.08)


def get_benchmark() -> Fp8Declared:
    return Fp8Declared()
