"""A decode step's projection with bf16 weights: cuBLAS's GEMV streams 2 bytes per weight.

out = x @ w.T for one token, x [1, 8192], w [28672, 8192] (the shape of Llama-3-70B's MLP gate or up
projection): 470 MB of weights for 470 MFLOP, 0.5 FLOP/B, far left of the ridge (~250 FLOP/B for bf16 on
an H100): the time is the weights' bytes over the memory bandwidth, whatever the arithmetic.

Predicted on an H100 (not measured): 470 MB at ~2.7-2.9 TB/s (cuBLAS GEMV, 90-95 % of the 3.0 TB/s copy
rate) ~ 165-175 µs. Clock: the default (CUDA events, L2 flushed: the weights come from HBM, as in a real
decode step where 70 B parameters never fit in L2). Work per call: the bf16 bytes (w, x, out) and 2NK FLOPs.
"""

from chapters.ch19.common import Gemv


def get_benchmark() -> Gemv:
    return Gemv()
