"""A prefill-sized projection in bf16: 4096 tokens through an 8192 x 8192 weight on the bf16 tensor cores.

out = x @ w.T, x [4096, 8192], w [8192, 8192] (chapters/ch19/training.py, ``Prefill``): 550 GFLOP over 192 MiB
of operands, ~2,900 FLOP/B: compute-bound on an H100 or H200 (ridge ~250 FLOP/B for bf16).

Predicted on an H100 or H200 (not measured): 550 GFLOP at ~650-750 TFLOP/s (cuBLAS, 85-95 % of the measured
bf16 peak) ~ 0.75-0.85 ms. Clock: the default (CUDA events, L2 flushed). Work per call: 2MNK FLOPs and the bf16
bytes; the fp32 reference's error is recorded (``rel_err_vs_fp32``).
"""

from chapters.ch19.training import Prefill


def get_benchmark() -> Prefill:
    return Prefill()
