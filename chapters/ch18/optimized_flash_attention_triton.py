"""The same attention through this chapter's own Triton flash-attention forward (common.attn_fwd, MODE=DENSE).

The one idea, written out: one program per 128 queries of one head; K and V tiles of 64 keys streamed through,
logits in fp32 (base 2, the 1/sqrt(d) scale folded into log2 e), an online softmax (running max and sum, the
output rescaled by exp2(old max - new max)), P cast to bf16 for the second tensor-core product; the last tile
bound-checked, every other tile not. 8 warps, 3 loads in flight (common.FLASH_TILES, recorded as ``tiles``).

Predicted on an H100: ~400-480 TFLOP/s (what Triton's fused-attention tutorial reaches without TMA descriptors
or warp specialisation): 0.55 TFLOP in ~1.15-1.4 ms, ~3.5x faster than the materialised form; 53-64 % of the bf16
peak, around the 60 % target. Under the CPU interpreter the bf16 tiles are multiplied as fp32 (exact products,
fp32 sums, as the tensor cores do).
"""

from chapters.ch18.common import DENSE, Attention, bf16_tolerance, dense_problem, flash, flash_tiles


def get_benchmark() -> Attention:
    return Attention(dense_problem, flash(DENSE), prepare=flash_tiles, config=bf16_tolerance())
