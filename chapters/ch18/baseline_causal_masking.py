"""Causal attention with the mask applied to every tile: all of the score matrix computed, half of it thrown away.

4 x 16 heads x 8,192 tokens, head dim 128, bf16, query i against keys 0..i. common.attn_fwd with
MODE=CAUSAL_MASKED: each block of 128 queries walks all 128 tiles of 64 keys and sets the logits of keys after
its queries to -inf (weight 0): the tiles right of the diagonal, entirely masked, are loaded, multiplied,
exponentiated and added as zeros. 2.2 TFLOP of tensor-core work for 1.1 of useful work.

Predicted on an H100: ~450 TFLOP/s of computed work, ~4.9 ms; ~225 TFLOP/s useful (~30 % of the bf16 peak).
Work per call (both sides): 4 x 128 FLOPs per pair with j <= i (1.1 TFLOP, common.attention_work); q, k, v read
and the output written once (512 MiB).
"""

from chapters.ch18.common import CAUSAL_MASKED, Attention, causal_problem, flash, flash_tiles


def get_benchmark() -> Attention:
    return Attention(causal_problem, flash(CAUSAL_MASKED), prepare=flash_tiles)
