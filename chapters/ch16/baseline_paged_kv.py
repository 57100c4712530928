"""A contiguous KV cache: every request gets a preallocated row of the model's whole context.

24 requests arrive at once (prompts of 32-256 tokens, 16-96 new tokens: ~200 positions each). The engine
(continuous batching, models.serving) must be ready for any request up to the 2,048-token context, so each
cache row reserves 2,048 positions x 74 KB (12 layers x K and V x 768 x fp32) = 151 MB; a budget of 4 rows
(604 MB) serves 4 requests at a time, each using a tenth of its row. Holding all 24 at once would take 3.6 GB
(the result's sizes: kv_cache_mb, kv_all_requests_mb). With 4 running, the ~1,340 tokens take ~340 decode
steps plus ~24 prefill steps; a 4-row decode step is launch-bound (~2.5-3 ms eager at full size).

Useful work (both sides): every prompt and generated token through the model once (common.generation_flops).
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import contiguous_engine, paged_requests


def get_benchmark() -> Serve:
    return Serve(paged_requests, contiguous_engine, "throughput")
