"""Prefill first: an arriving prompt is prefilled in a step of its own, and every decoding request waits for it.

24 requests with prompts of 1,000-1,990 tokens (24-48 new tokens each) arrive one every 15 ms of the run's GPU
time, onto requests that are decoding (16 slots, continuous batching). A step that admits a request runs its
whole prompt: ~1,500 tokens x 2 x 84.9 M weights + attention ~ 0.3 TFLOP, ~7 ms at the H100's fp32 rate plus
the step's launches, ~10 ms, during which no running request gets a token. So about one gap in six between a
request's tokens is a decode step plus a prefill (~13 ms) instead of a decode step alone (~2.7 ms): the tail
of the inter-token latency (ITL p99, the stall a reader of the stream sees) is the prefill's length.

Useful work (both sides): every prompt and generated token through the model once (common.generation_flops).
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import arriving_long_prompts, prefill_first_engine


def get_benchmark() -> Serve:
    return Serve(arriving_long_prompts, prefill_first_engine, "itl_p99")
