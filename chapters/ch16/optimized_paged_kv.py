"""A paged KV cache: the same bytes as blocks of 16 positions, each request holding only the blocks it fills.

The one idea (vLLM's PagedAttention): K and V live in a pool of fixed-size blocks; a request's positions map
to its blocks through a block table, so it reserves ceil((prompt + new tokens) / 16) blocks (~13) instead of a
2,048-position row. The same 604 MB (512 blocks + the null block) then holds all 24 requests at once (they need
~0.37 GB together, against 3.6 GB as contiguous rows: kv_all_requests_mb). A decode step gathers each running
request's blocks (one extra read and write of the keys it attends to, ~0.3 GB at 24 x ~200 positions) but
serves 24 rows instead of 4 for about the same launch-bound step time.

Predicted on an H100: ~100 steps instead of ~360 for the same tokens, ~3x the tokens/s; memory per request
~10x smaller (the pair's figure of merit, logged as sizes).
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import paged_engine, paged_requests


def get_benchmark() -> Serve:
    return Serve(paged_requests, paged_engine, "throughput")
