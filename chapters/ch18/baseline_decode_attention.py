"""One token's attention over a 32k-token KV cache, flash attention's way: one program per (batch, KV head).

A decode step of a Llama-3-8B-shaped layer: 32 query heads of one new token against a cache of 32,768 tokens in
8 KV heads (grouped-query attention: 4 query heads share each KV head), head dim 128, bf16. common.decode_split
with one split: a program per KV head loads its 4 query rows and walks all 32,768 keys and values in tiles of
64 with the online softmax, reading each key and value once for the 4 heads. That is the loop a flash-attention
forward runs, and with one query it has nothing else to parallelise over: 8 programs on 132 SMs, each streaming
16.8 MB through one SM (3 tiles of 32 KB in flight, ~100 GB/s a program): ~0.8 TB/s, ~170 us predicted.

Why this baseline and not SDPA or the written-out form: it isolates the one idea (the same kernel, tiles and
arithmetic, one split instead of 64). SDPA's flash backend chooses its own number of key splits for short query
lengths (FlashAttention-2's split-KV heuristic), so it would compare two split counts it picks itself; the
written-out form at one query is three kernels (a batched GEMV over K, a softmax, one over V) whose cost depends
on cuBLAS's choice for an M = 4 product rather than on the idea.

Work per call (both sides): K and V read once (134 MB) + q and the output; 4 x 128 FLOPs per (query head, key).
Memory-bound: the ceiling is the copy bandwidth (~3.0 TB/s measured on an H100): 45 us.
"""

from chapters.ch18.common import Attention, bf16_tolerance, decode, decode_problem, keys_per_split


def get_benchmark() -> Attention:
    return Attention(decode_problem, decode, prepare=keys_per_split(False), config=bf16_tolerance())
