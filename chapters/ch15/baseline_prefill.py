"""Prefill token by token: the prompt goes through the decode path one position per step.

8 prompts of 200-256 tokens, 8 new tokens each, one batch over a KV cache. Step k feeds every row its prompt
token k (or, once its prompt is done, its last generated token): a row's first token comes out of the step
that fed its last prompt token, ~230 steps in (the median prompt). Each step is an 8-token decode step, bound
by eager kernel launches (~2.5-3 ms at full size; its matmuls have 8 rows against 768-wide weights), so TTFT
~ prompt length x step time, ~0.6 s; the whole generation ~263 steps.

Useful work (both sides): every prompt and generated token through the model once, ~0.4 TFLOP
(common.generation_flops): the same FLOPs here in ~263 thin steps.
"""

from chapters.ch15.common import Serve, TokenByTokenEngine, long_prompts


def get_benchmark() -> Serve:
    return Serve(long_prompts, TokenByTokenEngine, "ttft")
