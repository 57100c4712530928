"""One decode step of 64 sequences through a bf16 projection: cuBLAS streams 2 bytes per weight.

out = x @ w.T, x [64, 8192] (64 sequences' current tokens), w [28672, 8192] (Llama-3-70B's MLP gate or up
projection; chapters/ch19/training.py, ``DecodeBatch``): 470 MB of weights for 3.8 GFLOP, 8 FLOP/B, far left
of the ridge (~150-250 FLOP/B for bf16 on an H100 or H200): the time is the weights' bytes over the memory
bandwidth, as in the int8_weight_only pair's single token, with 64 rows sharing each weight read.

Predicted on an H200 (not measured): 470 MB at ~3.8-4.2 TB/s ~ 115-125 µs. Clock: the default (CUDA events, L2
flushed: the weights come from HBM). Work per call: 2MNK FLOPs and the bf16 bytes; the fp32 reference's error
is recorded (``rel_err_vs_fp32``).
"""

from chapters.ch19.training import DecodeBatch


def get_benchmark() -> DecodeBatch:
    return DecodeBatch()
