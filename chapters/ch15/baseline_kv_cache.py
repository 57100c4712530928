"""Decoding without a KV cache: every step runs the whole sequence through the model again.

6 requests with ~1k-token prompts (987-1024) generate 24 tokens each, as one batch. Step k feeds every row's
prompt and its k tokens so far (right-padded to 1024 + k) through all 12 layers and keeps the last position's
logits: each new token costs a full prefill of its context. Per step at full size: 6 x ~1036 tokens x
2 x 84.9 M weights ~ 1.06 TFLOP of matmuls plus ~0.12 TFLOP of attention (every position against every
earlier one), ~25-30 ms at the H100's fp32 rate (51 TFLOP/s, no TF32). TPOT is that step time; TTFT is the
same one pass (the first step is a prefill in either engine).

Useful work of a generation (both sides, common.generation_flops): each of the 6 x (prompt + 23) tokens
through the model once, ~1.2 TFLOP: the baseline does it ~24 times over for the prompt.
"""

from chapters.ch15.common import RecomputeEngine, Serve, long_context


def get_benchmark() -> Serve:
    return Serve(long_context, RecomputeEngine, "tpot")
