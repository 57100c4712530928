"""Static batching: requests served 16 at a time, each batch until its longest answer is done.

48 requests arrive at once: prompts of 16-256 tokens, three in four want 8-32 tokens, one in four 96-256. A
static batch of 16 holds ~4 long answers, so after ~30 steps most of its rows are finished and keep running
as padding until the longest (~220 tokens) is done: ~3 batches x ~225 decode steps, each step the cost of a
16-row decode whatever share of its rows still produce tokens. Useful tokens: ~2,800 of the ~10,800 row-steps
(~26 %). Each decode step is launch-bound at full size (~2.5-3 ms: 12 layers of eager kernels; reading the
0.54 GB of weights and the cache takes ~0.3 ms), so throughput is tokens / steps.

Useful work (both sides): every request's prompt and generated tokens through the model once
(common.generation_flops). Both keep 16 cache rows; a static row runs on after its answer, so its rows span
the longest prompt + the longest answer (the continuous engine's: the longest request).
"""

from bench import context
from chapters.ch15.common import SLOTS, Serve, StaticEngine, mixed_lengths


def get_benchmark() -> Serve:
    return Serve(mixed_lengths, lambda w: StaticEngine(w, batch=context().size(*SLOTS)), "throughput")
