"""Speculative decoding with k = 2 draft tokens a round (the same draft and target as k = 4).

Fewer drafts: a round costs 385 + 2 x 85 + ~9 = 564 launches (~1.46 target steps) and keeps 2.67 tokens
(measured on the CPU at full size: 0.83 of drafts accepted). Predicted on an H100: TPOT ~2.7 ms -> ~1.5 ms, ~1.8x.
"""

from chapters.ch17.common import SpecServe, one_at_a_time, speculative


def get_benchmark() -> SpecServe:
    return SpecServe(one_at_a_time, speculative(2, 1), "tpot")
