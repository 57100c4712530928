"""A sliding window through dense SDPA: an additive [s, s] mask, every (query, key) pair computed.

2 x 16 heads x 8,192 tokens, head dim 128, bf16; query i attends to keys i - 1,023..i (a causal window of 1,024
tokens, as in Gemma 3's local layers). Without a way to tell SDPA which blocks are empty, the window is a mask
tensor (0 inside, -inf outside; 128 MiB, built once in set-up) and the fused kernel computes all 67 M pairs of
every head and reads the mask for each: 12 % of them are useful. Pinned to the memory-efficient backend on a GPU
(the flash backend takes no mask), recorded as ``sdpa_backend``.

Predicted on an H100: 1.1 TFLOP computed at ~200-250 TFLOP/s plus the mask's reads (128 MiB per head from HBM,
~4 GB): ~5-7 ms; ~20-25 TFLOP/s useful. Work per call (both sides): 4 x 128 FLOPs per pair inside the window,
0.13 TFLOP (common.window_pairs); q, k, v read and the output written once.
"""

from chapters.ch18.common import Attention, bf16_tolerance, call_masked, dense_window_mask, window_problem


def get_benchmark() -> Attention:
    return Attention(window_problem, call_masked, prepare=dense_window_mask, config=bf16_tolerance())
