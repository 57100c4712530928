"""Speculative decoding (k = 4, one request at a time) with the draft's passes launched eagerly.

Chapter 17's speculative engine as ``optimized_speculative``: per round, 4 draft passes of 2 blocks + the head
(85 kernel launches each, 340 in all) and one target pass (385). The draft's passes are tiny on the GPU (one
token through two blocks: ~2 us per kernel, the 100 MB LM head ~35 us) and their launches cost ~6 us each: the draft
loop is ~2 ms of host time for ~0.8 ms of GPU work, nearly half of a ~4.6 ms round.

Useful work (both sides): every prompt and generated token through the target once.
"""

from chapters.ch17.common import K, SpecServe, one_at_a_time, speculative


def get_benchmark() -> SpecServe:
    return SpecServe(one_at_a_time, speculative(K, 1), "tpot")
