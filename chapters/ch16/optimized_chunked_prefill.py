"""Chunked prefill mixed with decode: each step carries every decoding request's token plus a chunk of a prompt.

The one idea (Sarathi-Serve; vLLM's chunked prefill): a per-step budget of 512 tokens; the decoding requests
take one each, the rest goes to the next prompt chunk, and both run in one forward pass (their matmuls packed
over one read of the weights; attention per segment, models.gpt.Segment). A 1,500-token prompt becomes ~3 mixed
steps of ~6 ms instead of one ~10 ms stall, and decoding never stops: the worst gap between a request's tokens
is a mixed step. Predicted on an H100: ITL p99 ~13 ms -> ~6 ms, ~2x. The price, by design: a prompt's first
token now waits for its last chunk, so TTFT gets longer (logged as ttft_*); throughput is about the same.
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import arriving_long_prompts, chunked_engine


def get_benchmark() -> Serve:
    return Serve(arriving_long_prompts, chunked_engine, "itl_p99")
