"""A mixture-of-experts layer routed by a loop over its experts: a host sync, a gather, two GEMMs and a scatter
per expert.

64 experts (GELU MLP 2048 -> 1408 -> 2048, bf16), top 6 of 4096 tokens (chapters/ch17/moe.py, ``MoE``): 283
GFLOP of expert GEMMs in 128 small GEMMs of ~384 rows, and 64 ``nonzero`` calls whose counts the host must read
before it can launch the next expert's work.

Predicted on an H100 or H200 (not measured): each expert ~40-60 µs of host launches and a sync that drains the
GPU, ~3-4 ms of host time per call, the GEMMs at a fraction of peak (~384-row tiles) ~1 ms, mostly serialised
with the host: ~4-5 ms per call. Clock: wall (the syncs are the point).
"""

from chapters.ch17.moe import MoE


def get_benchmark() -> MoE:
    return MoE(grouped=False)
