"""The same MLP compiled with ``mode="max-autotune-no-cudagraphs"``: autotuned Triton matmuls with the bias and
SiLU fused into their epilogue.

The one idea: let Inductor benchmark its own Triton matmul templates (tile shapes, warps, stages, and on an
H100 its persistent TMA kernels) against cuBLAS for each matmul shape while it compiles, and, where a template
wins, apply the bias and the SiLU to the accumulator before the store (epilogue fusion). Each layer then
reads its input and writes its activation once: 2 passes over 128 MiB instead of 4. ``mode="max-autotune"``
is the same plus CUDA graphs (chapter 12's idea, little help to 8 large kernels), left out so the pair
measures the autotuning alone.

The cost is compile time: the autotuning benchmarks a few dozen kernels per matmul shape (one shape here)
and every epilogue fusion candidate, ~1-3 minutes cold on the H100, recorded as ``compile_s`` beside the
default mode's in the baseline's result (Inductor caches the choices on disk: a second run is faster).

Predicted on an H100: 8 x 2 x 128 MiB = 2.1 GB ≈ 0.8 ms per call, ~1.6-1.9x. Ceiling: the copy bandwidth
for 2 passes per layer (~0.7 ms). Precision: the fused epilogue rounds once where cuBLAS + the pointwise
kernel round twice; outputs agree within bf16's default tolerance. Work and clock: as the baseline.
"""

from chapters.ch14.common import Mlp


def get_benchmark() -> Mlp:
    return Mlp("max-autotune-no-cudagraphs")
