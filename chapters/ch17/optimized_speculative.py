"""Speculative decoding, k = 4: the draft proposes four tokens, one target pass checks them all.

The one idea: a target pass over k + 1 tokens costs what a one-token pass costs (the same launches, the weights
read once), so a cheap draft guesses k tokens and one target pass keeps the longest prefix it agrees with plus its
own next token: exactly plain greedy decoding's tokens (checked token for token), 1 to k + 1 of them per target
pass. The draft is the target's first 2 blocks with its head (GPT.early_exit), sharing its weights and its KV cache
(common.py); each draft step launches 85 kernel ops against the target's 385 (counted on the CPU).

Predicted on an H100 from those counts (launch-bound: time ~ launches): a round costs 385 + 4 x 85 + ~9 = 734
launches, ~1.9 target steps, and keeps 4.06 tokens (measured on the CPU with the full-size model and these
prompts: 0.77 of the drafts accepted): TPOT ~2.7 ms -> ~1.3 ms, ~2.1x. The measured acceptance is in the result
(``acceptance_rate``, ``tokens_per_round``); the speedup follows tokens_per_round / 1.9.
"""

from chapters.ch17.common import K, SpecServe, one_at_a_time, speculative


def get_benchmark() -> SpecServe:
    return SpecServe(one_at_a_time, speculative(K, 1), "tpot")
