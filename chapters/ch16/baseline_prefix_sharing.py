"""Every request prefills its whole prompt, though 1,024 of its ~1,090 tokens are the same system prompt.

32 requests arrive at once, each a shared 1,024-token prefix + its own 32-96 tokens, 16 new tokens each (a paged
cache large enough for all of them, continuous batching; prefills take up to 8,192 tokens a step). Prefill is
~35k tokens: 5 steps of ~7 requests (7,600 tokens x 2 x 84.9 M weights + attention ~ 1.45 TFLOP, ~32 ms each at
the H100's fp32 rate), so the median request gets its first token after ~3 of them, ~100 ms. The cache holds
the prefix's keys and values 32 times over (kv_all_requests_mb).

Useful work (both sides, common.generation_flops): the prefix once and each request's own tokens: what prefix
sharing computes (the baseline computes the prefix 31 more times).
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import prefix_engine, shared_prefix


def get_benchmark() -> Serve:
    return Serve(shared_prefix, lambda w: prefix_engine(w, share=False), "ttft")
