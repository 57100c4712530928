"""Prefix caching: the shared prompt's blocks are computed once and every request's block table points at them.

The one idea (vLLM's automatic prefix caching, SGLang's RadixAttention): a full block of a prompt is named by
a hash chained over the tokens up to its end; a request whose blocks are already in the cache shares them
(reference-counted) and prefills only the rest. The first request computes the 64 prefix blocks in a step of
its own (~1,090 tokens, ~7 ms); the other 31 wait one step and then prefill only their own ~64 tokens in one
step (~3,000 tokens with padding, ~15 ms, attending to the shared blocks). Predicted on an H100: median TTFT
~100 ms -> ~25 ms, ~4x; the prefix's keys and values stored once instead of 32 times (kv_all_requests_mb).
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import prefix_engine, shared_prefix


def get_benchmark() -> Serve:
    return Serve(shared_prefix, lambda w: prefix_engine(w, share=True), "ttft")
