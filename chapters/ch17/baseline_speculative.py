"""Plain greedy decoding: one target pass per token, one request at a time.

4 requests (prompts of 64-192 tokens, 96 new tokens each) served one after another (a single stream, the latency
case speculative decoding is for), each a prefill pass and then 95 one-token passes of the 12-layer target over
its KV cache. A pass is launch-bound on an H100: 385 kernel-launching ops (counted on the CPU, views excluded),
~2.5-3 ms eager against ~0.2 ms of weight reads (0.54 GB at 3 TB/s). TPOT = that step, ~2.5-3 ms.

The target is chapter 15's model with its last ten blocks' residual projections scaled by 0.1 (common.py says
why: it gives the optimized side a draft that agrees with it); it costs what any model of its shape costs.
Useful work (both sides): every prompt and generated token through the target once (models.serving.generation_flops).
"""

from chapters.ch15.common import Serve
from chapters.ch17.common import one_at_a_time, plain


def get_benchmark() -> Serve:
    return Serve(one_at_a_time, plain(1), "tpot")
