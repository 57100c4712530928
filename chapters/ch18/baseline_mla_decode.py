"""An MLA model's decode step served as multi-head attention: every head's decompressed key and value in the
cache, SDPA over them.

16 sequences x 4,096 cached tokens, 128 heads; a head's key is 128 decompressed + 64 shared RoPE dims, its value
128 (DeepSeek-V2/V3's shape; chapters/ch18/latent.py, ``Mla``). The cache: 16 x 128 x 4096 x (192 + 128) bf16 =
5.0 GiB, read once per step. The arithmetic is ~1 FLOP per byte: the step is the cache's bytes over HBM's
bandwidth.

Predicted on an H100 or H200 (not measured): 5.4 GB at ~2.6-2.9 TB/s (H100; ~4.0-4.4 on the H200) ~ 1.9-2.1 ms
(1.2-1.4 ms on the H200). Clock: the default (CUDA events, L2 flushed). Work: the attention's FLOPs as MHA
computes them.
"""

from chapters.ch18.latent import Mla


def get_benchmark() -> Mla:
    return Mla(latent=False)
