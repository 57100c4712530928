"""Plain greedy decoding of a batch: 8 requests at once, one target pass per token for all of them.

8 requests (prompts of 64-192 tokens, 96 new tokens each) as one static batch: a prefill pass, then 95 decode
passes of 8 rows each. Still launch-bound on an H100: 8 rows' matmuls read the 0.54 GB of weights once (~0.2 ms)
under 385 kernel launches (~2.5-3 ms). ~96 passes of ~2.7 ms: ~0.26 s a generation, ~2,900 tokens/s.

Useful work (both sides): every prompt and generated token through the target once.
"""

from chapters.ch15.common import Serve
from chapters.ch17.common import batch_of_requests, plain


def get_benchmark() -> Serve:
    return Serve(batch_of_requests, plain(None), "throughput")
