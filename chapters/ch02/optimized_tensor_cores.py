"""The same product with the operands rounded to bf16 first: the tensor cores, fp32 accumulation.

The one idea, and it is lower precision: each call rounds A and B to bf16 (8 bits of mantissa instead of
24; what autocast does per op), which lets cuBLAS use the tensor cores (wgmma on an H100) at ~15x the
fp32 CUDA-core rate; products are accumulated in fp32 and rounded to bf16 once, as on the baseline
side. The results differ by the operands' rounding: a norm-wise relative error of ~3e-3 for N(0, 1)
operands (~2^-9 per operand, averaged over 8192 products per output), checked against rtol 1e-2 (set in
get_config: declared, not the default).

The two casts read 512 MiB and write 256 MiB per call (~0.26 ms at the copy bandwidth): a model that
keeps its weights in bf16 would not pay them.
Expected on an H100: ~1.45 ms of matmul at the measured ~755 TFLOP/s + ~0.26 ms of casts: ~1.7 ms, ~12x
faster, ~80 % of the measured bf16 matmul peak (target: >= 60 %).

Work per call: as the baseline (common.product).
"""

import torch

from bench import BenchmarkConfig
from chapters.ch02.common import Example, product


def launch(inp: tuple[torch.Tensor, torch.Tensor], out: torch.Tensor) -> None:
    a, b = inp
    torch.mm(a.to(torch.bfloat16), b.to(torch.bfloat16), out=out)


def get_benchmark() -> Example:
    return Example(product, launch, BenchmarkConfig(rtol=1e-2))
