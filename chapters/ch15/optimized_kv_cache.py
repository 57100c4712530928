"""Decoding with a KV cache: the prompt's keys and values are computed once and kept, each step adds one token.

The one idea: a contiguous cache (one row of 1024 + 24 positions per request, 12 layers x K and V: ~74 KB
per token in fp32, 463 MB for the 6 rows) written by the prefill pass; a decode step feeds one token per
row, writes its key and value at the row's position and attends to the cached ones. The step's matmuls
shrink from 6 x ~1036 tokens to 6 (what remains is reading the 0.54 GB of weights and the rows' ~0.46 GB
of cache, ~0.35 ms at 3 TB/s), and eager PyTorch's ~490 kernel launches per step (~2.5-3 ms of host time)
become the bound. Predicted on an H100: TPOT ~25-30 ms -> ~3 ms, about 8-10x (issue 24's target: >= 5x at
1k context); TTFT unchanged (the same prefill pass).

Same requests, same greedy tokens (checked exactly), same useful work (common.generation_flops).
"""

from chapters.ch15.common import Serve, StaticEngine, long_context


def get_benchmark() -> Serve:
    return Serve(long_context, lambda w: StaticEngine(w, batch=len(w.requests)), "tpot")
