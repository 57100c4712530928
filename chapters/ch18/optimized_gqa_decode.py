"""The same grouped-query decode with ``enable_gqa=True``: SDPA reads the 8 KV heads as they are stored.

The one idea: no copies. ``F.scaled_dot_product_attention(q, k, v, enable_gqa=True)`` takes k and v with 8 heads
for q's 32 and maps query head h to KV head h // 4 inside the kernel (the mapping ``repeat_kv`` spells out), pinned
to the flash backend as on the baseline side (recorded as ``sdpa_backend``). PyTorch's FlashAttention-2 forward
goes further for one query token: it folds the 4 query heads of a group into 4 query rows of one KV head
(``seqlenq_ngroups_swapped`` in flash_api.cpp), so each key and value tile is loaded once for the 4 heads, and it
splits the 32,768 keys across programs to fill the SMs (its split-KV heuristic).

Per call: K and V read once (537 MB) + q and the output. Expected on an H100 (not measured): ~2.0-2.6 TB/s, ~210-
270 us against ~1.9 ms: ~7-9x (the baseline moves ~9x the bytes), ~65-85 % of the copy bandwidth (whether it
reaches the 80 % target is the GPU run's to say; chapter 18's own flash-decoding kernel reached 85 % on one
sequence). The outputs differ from the baseline's only in summation order (the keys are split differently for 8
heads than for 32): tolerance common.BF16_ATTENTION_RTOL; identical on the CPU at smoke size.

Work per call: as the baseline (common.decode_work).
"""

from chapters.ch18.common import Attention, SDPBackend, bf16_tolerance, gqa_problem, recorded, sdpa


def get_benchmark() -> Attention:
    backend = SDPBackend.FLASH_ATTENTION
    return Attention(gqa_problem, sdpa(backend, enable_gqa=True), prepare=recorded(backend), config=bf16_tolerance())
