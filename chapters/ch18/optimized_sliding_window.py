"""The same sliding window through FlexAttention: a mask function, compiled into a kernel that skips empty blocks.

The one idea: describe the mask (``mask_mod``: q_idx >= kv_idx and q_idx - kv_idx < 1024) instead of storing
it. ``create_block_mask`` finds, once, which 128 x 128 blocks of the score matrix are empty, full or partial;
``torch.compile(flex_attention)`` generates a flash-style Triton kernel that visits only the non-empty blocks
(9 of 64 per query block here), evaluates the mask function only in the partial ones, and never reads a mask
tensor. The compile (tens of seconds) happens in set-up and is recorded (``compile_s``), as is the share of
blocks computed (``block_mask``). On the CPU, torch.compile generates its CPU FlexAttention kernel (~10 s to
compile at smoke size).

Predicted on an H100: ~9 / 64 of the blocks, ~0.15 TFLOP computed at ~300-350 TFLOP/s (FlexAttention runs at
~85-90 % of FlashAttention-2): ~0.5-0.7 ms, ~8-12x faster than the dense masked SDPA.
"""

from chapters.ch18.common import Attention, bf16_tolerance, call_masked, flex_window, window_problem


def get_benchmark() -> Attention:
    # The compile runs in set-up: a longer set-up limit than the default 30 s.
    config = bf16_tolerance(setup_timeout_seconds=300.0)
    return Attention(window_problem, call_masked, prepare=flex_window, config=config)
