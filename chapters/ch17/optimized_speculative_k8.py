"""Speculative decoding with k = 8 draft tokens a round (the same draft and target as k = 4).

More drafts: a round costs 385 + 8 x 85 + ~9 = 1,074 launches (~2.8 target steps) and keeps 5.63 tokens
(measured on the CPU at full size: 0.58 of drafts accepted: the later drafts of a round are wrong more often, and
all of a round's drafts after its first wrong one are wasted). Predicted on an H100: TPOT ~2.0x, no better than
k = 4 (~2.1x): the extra drafts cost about what the extra kept tokens save.
"""

from chapters.ch17.common import SpecServe, one_at_a_time, speculative


def get_benchmark() -> SpecServe:
    return SpecServe(one_at_a_time, speculative(8, 1), "tpot")
