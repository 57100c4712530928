"""First come, first served: the waiting queue is admitted in arrival order.

40 requests arrive at once for 8 slots (continuous batching): first 8 that want long answers (96-192 tokens),
then 32 that want short ones (4-24), prompts of 32-512 tokens. In arrival order the 8 long requests take every
slot and hold them for ~100-190 decode steps; the 32 short ones queue behind them (a convoy, or head-of-line
blocking) and the median request's first token comes after ~100+ steps, ~0.3-0.4 s at ~2.7 ms a step.

Useful work (both sides): every prompt and generated token through the model once (common.generation_flops);
the same requests and tokens, only their order differs.
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import convoy, scheduled_engine


def get_benchmark() -> Serve:
    return Serve(convoy, lambda w: scheduled_engine(w, "fcfs"), "ttft")
