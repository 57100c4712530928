"""Dynamic int8 where it pays: w quantised per output channel once (at load), the 64 rows of x quantised per
row in every call, the GEMM on the int8 tensor cores (``torch._int_mm``, int32 accumulation), both scales
applied on the way out.

The one idea: a memory-bound step is paid in weight bytes, and int8 codes are half of bf16's; unlike weight-only
int8 (int8_weight_only), the activations are int8 too, so the tensor cores multiply the codes as they are and 64
rows need no widening of every weight in registers. The per-call work is x's quantisation (64 x 8192: ~1 MB)
and the int32 product's rescale (64 x 28672: ~7 MB read, ~4 MB written): a few µs, against ~60 µs saved.

At prefill size (x [4096, 8192] @ w [8192, 8192], compute-bound) the same code read 0.49x on the H200 (651 µs
bf16 against 1.32 ms): there the GEMM's rate is what counts, and ``torch._int_mm``'s int8 GEMM with the passes
over a 4096-row int32 product (~1.5 GB of eager traffic) lost to cuBLAS's bf16 (the README says more).

Predicted on an H200 (not measured): 235 MB at ~3.5-4.0 TB/s ~ 60-70 µs plus ~10-15 µs of small passes: ~75-85
µs against ~120 µs, ~1.4-1.6x (ceiling 2x, the bytes ratio). Precision: ~1.1 % norm-wise against bf16 (two int8
roundings); the pair's tolerance is 3 % (``RTOL_DYNAMIC``). Work as the baseline; the side states its ceiling:
the int8 codes and scales read once at the copy bandwidth (``read_ceiling``, timed in setup).
"""

from chapters.ch19.training import DynamicInt8


def get_benchmark() -> DynamicInt8:
    return DynamicInt8()
