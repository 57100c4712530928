"""Grouped-query decode the way many model implementations write it: the KV heads copied out to the query heads
(``repeat_kv``), then SDPA on the copies.

A decode step of a Llama-3-8B-shaped layer for 4 sequences: one new token each, 32 query heads against a cache of
32,768 tokens held as 8 KV heads (4 query heads share each KV head), head dim 128, bf16. The cache is stored with 8
heads (that is GQA's memory saving), so a model whose attention call wants equal head counts (Hugging Face Llama's
``repeat_kv`` before ``F.scaled_dot_product_attention``) copies K and V to 32 heads at every step:
common.repeat_kv, then SDPA pinned to its flash backend (common.expanded; recorded as ``sdpa_backend``, the
same backend as the optimized side, so the pair differs only in the copies).

Per call: K and V read (512 MiB), 4 x that written (2 GiB), then the 2 GiB of copies read by the attention
kernel: ~4.8 GB of traffic for 537 MB of cache, ~9x the minimum. Expected on an H100 (not measured): the two
copies at ~2.8 TB/s (2.7 GB, ~0.95 ms) + the attention over 32 heads at ~2.3 TB/s (2.15 GB, ~0.9 ms): ~1.9 ms,
~10 % of the copy bandwidth in useful bytes. The copies also hold 2 GiB of device memory per layer call.

Work per call (both sides, common.decode_work): K and V read once as stored (8 heads: 537 MB) + q and the output;
4 x 128 FLOPs per (query head, cached key), 2.1 GFLOP. Memory-bound (4 FLOP/byte): ceiling the copy bandwidth
(~3.0 TB/s measured on an H100), 179 us. What this side moves beyond that is its own cost.
"""

from chapters.ch18.common import Attention, SDPBackend, bf16_tolerance, expanded, gqa_problem, recorded


def get_benchmark() -> Attention:
    backend = SDPBackend.FLASH_ATTENTION
    return Attention(gqa_problem, expanded(backend), prepare=recorded(backend), config=bf16_tolerance())
