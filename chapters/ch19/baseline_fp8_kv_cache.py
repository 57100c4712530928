"""Decode attention over a bf16 KV cache: 8 sequences x 32 heads x 8192 positions x 128 dims, 1 GiB read.

One decode step of one layer: the new token's k and v written at the last position, then its query
against every cached key and value (split-K "flash decoding": 8192 programs of 256 positions, 64 a step, online
softmax, then a combine kernel over each head's 32 partial results). 2 B per cached element, 2 FLOPs per
byte: memory-bound.

Predicted on an H100 (not measured): 1 GiB at ~2.6-2.9 TB/s ~ 370-410 µs. Clock: the default (CUDA
events, L2 flushed: the cache is 20x L2). Work per call: the bf16 cache's bytes (K and V read once) and
4·B·H·S·D FLOPs.
"""

from chapters.ch19.common import DecodeAttention


def get_benchmark() -> DecodeAttention:
    return DecodeAttention(fp8=False)
