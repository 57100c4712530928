"""Prefill and decode on one GPU: a long prompt's prefill stalls every decoding request for its whole length.

24 requests with prompts of 1,000-1,990 tokens (24-48 new tokens each) arrive one every 15 ms of the run's time
onto requests decoding on one GPU (continuous batching, 16 slots, prefill first: chapter 16's baseline engine).
A prefill of ~1,500 tokens is ~0.3 TFLOP (~6 ms at the fp32 rate, 51 TFLOP/s, plus launches: ~8-10 ms), and no
running request gets a token meanwhile; decode steps (~3 ms: 385 launches, and each step gathers its rows' cache)
fill what is left of each 15 ms. So a request's tokens come ~2-3 per 15 ms window: TPOT ~5-8 ms, and the worst
gaps (ITL p99) are a prefill plus a decode step, ~12-13 ms.

Needs two GPUs (skipped otherwise, on both sides: the pair is measured on one host) and uses one of them.
Useful work (both sides): every prompt and generated token through the model once.
"""

from chapters.ch17.common import TwoGPUServe, arriving_long_prompts, colocated_engine


def get_benchmark() -> TwoGPUServe:
    return TwoGPUServe(arriving_long_prompts, colocated_engine, "tpot")
