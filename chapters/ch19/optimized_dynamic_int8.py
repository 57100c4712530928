"""Dynamic int8 where it pays: w quantised per output channel once (at load), the 64 rows of x quantised per
row in every call, the GEMM on the int8 tensor cores with both scales applied in its epilogue: two Triton
kernels a call.

The one idea: a memory-bound step is paid in weight bytes, and int8 codes are half of bf16's; unlike weight-only
int8 (int8_weight_only), the activations are int8 too, so the tensor cores multiply the codes as they are
(``wgmma`` m64n128k32 s8 on sm_90: one warpgroup's MMA covers the 64 rows) and no weight is widened in registers.
The per-call work besides the weights is x's quantisation (64 x 8192: 1 MB read, 0.5 MB written, one kernel) and
the bf16 output (3.7 MB); the int32 product never reaches memory.

Why the eager form loses (0.98x on the H200: 119 µs bf16, 121 µs int8, docs/results/h200.md): it quantises x
in ~7 eager ops, calls ``torch._int_mm`` (cuBLAS's int8 GEMM, whose M = 64 kernel read the codes at ~2.6 TB/s by
those figures) and rescales the int32 product in two more passes (~15 MB): ~30 µs of small kernels beside a
~90 µs GEMM. This side is one small kernel and one GEMM that streams the weights with 4 K steps in flight.

At prefill size (x [4096, 8192] @ w [8192, 8192], compute-bound) the eager form read 0.49x on the H200 (651 µs
bf16 against 1.32 ms): there the GEMM's rate is what counts, not bytes (the README says more).

Predicted on an H200 (not measured): 235 MB at ~3.4-3.9 TB/s ~ 60-70 µs plus ~3-5 µs for x's quantisation:
~65-75 µs against ~119 µs, ~1.6-1.8x (ceiling 2x, the bytes ratio). Precision: ~1.1 % norm-wise against bf16
(two int8 roundings); the pair's tolerance is 3 % (``RTOL_DYNAMIC``). Work as the baseline; the side states its
ceiling: the int8 codes and scales read once at the copy bandwidth (``read_ceiling``, timed in setup).
"""

from chapters.ch19.training import DynamicInt8


def get_benchmark() -> DynamicInt8:
    return DynamicInt8()
