"""One token through a bf16 projection, cuBLAS's GEMV: 2 bytes per weight streamed (int8_weight_only's baseline).

out = x @ w.T, x [1, 8192], w [28672, 8192] (Llama-3-70B's MLP gate or up projection): 470 MB of weights for
470 MFLOP, ~0.5 FLOP/B, memory-bound: the time is the weights' bytes over the memory bandwidth. Smoke: 1 x 256 x
384 (K a multiple of the int4 side's group of 128).

Predicted on an H200 (not measured): 470 MB at ~3.9-4.2 TB/s ~ 115-125 µs (the H100 read 160 µs for this call:
chapter 19's int8_weight_only). Clock: the default (CUDA events, L2 flushed: the weights come from HBM). Work per
call: 2NK FLOPs and the bf16 bytes.
"""

from chapters.ch19.common import Gemv4


def get_benchmark() -> Gemv4:
    return Gemv4()
