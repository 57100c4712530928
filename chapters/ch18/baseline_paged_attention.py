"""Decode attention over a paged KV cache, gather-then-attend: each sequence's blocks copied into a padded
contiguous K and V, then SDPA with a length mask (a KV head's 4 query heads as its query rows: no copy per query
head).

32 sequences of 512-8,192 cached tokens in 16-token blocks shuffled through a pool, 32 query / 8 KV heads of 128
(chapters/ch18/latent.py, ``Paged``). The gather copies every sequence to the longest one's 8,192 positions:
2 x 32 x 8192 x 8 x 128 x 2 B = 1.07 GB written, then read by SDPA, for ~0.56 GB of real cache.

Predicted on an H100 or H200 (not measured): the gather reads ~1.07 GB (padding entries read block 0) and writes
1.07 GB, SDPA reads 1.07 GB: ~3.2 GB at ~2.6-2.9 TB/s ~ 1.1-1.3 ms. Clock: the default (CUDA events, L2
flushed). Work: the FLOPs and the K/V bytes of each sequence's own tokens.
"""

from chapters.ch18.latent import Paged


def get_benchmark() -> Paged:
    return Paged(kernel=False)
