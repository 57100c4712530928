"""Prefill in one pass: all prompts' tokens through the model in one forward, then decode.

The one idea: the prompt is known up front, so its positions need not wait for each other — one pass over the
8 right-padded prompts (8 x 256 tokens, causal attention) computes every position's keys and values into the
cache and the logits of each row's last prompt token. The matmuls have 2,048 rows instead of 8: 2 x 2048 x
84.9 M ~ 0.35 TFLOP, ~8 ms at the H100's fp32 rate, in one step's worth of launches. Predicted: TTFT ~0.6 s
-> ~10 ms, tens of times better; the 7 decode steps after it are the same on both sides.
"""

from chapters.ch15.common import Serve, StaticEngine, long_prompts


def get_benchmark() -> Serve:
    return Serve(long_prompts, lambda w: StaticEngine(w, batch=len(w.requests)), "ttft")
