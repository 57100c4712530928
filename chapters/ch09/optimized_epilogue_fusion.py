"""gelu(x @ W + b) with the bias and the GELU applied in the matmul's epilogue, before C is stored.

Same kernel, same tiles; the one change is ``BIAS_GELU``: once a program's 128 x 128 fp32
accumulator is complete, it adds the bias row and applies the erf GELU in registers and stores the
result once. The 512 MiB of extra passes and two launches disappear, and C is rounded to bf16 once
instead of three times (outputs agree with the baseline within the default bf16 rtol). The
epilogue's ~20 instructions per element over 16 Ki elements per tile cost ~1 µs against a tile's
~15 µs main loop, and two programs share an SM (118 registers x 256 threads, 96 KiB of shared
memory each; ptxas, sm_90), so one's epilogue overlaps the other's main loop. The 128 x 256 tile of
chapter 8 would spill with this epilogue (255 registers + 168 bytes of stack per thread on sm_90).

Predicted (not measured): 1.3-1.45x faster than the baseline on an H100, at >= 60 % of the bf16
matmul peak (~480+ TFLOP/s, ~0.5-0.57 ms per call).

Work (minimum): as the baseline, 208 MiB and 275 GFLOP per call.
"""

from chapters.ch09.common import Example, ffn_up, matmul


def get_benchmark() -> Example:
    return Example(ffn_up, matmul(block=(128, 128, 64), num_warps=8, num_stages=3))
