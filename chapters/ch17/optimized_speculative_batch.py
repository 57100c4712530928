"""Speculative decoding of a batch: every row drafts 4 tokens, one target pass checks all 8 rows' drafts.

The one idea, batched: a round is the draft's 4 one-token passes over the 8 rows and one target pass of 8 x 5
tokens; each row keeps its own agreeing prefix + the target's token (rows advance by different amounts: positions
are per row, so nothing waits but the batch's end). The batch is done when its slowest row is: measured on the CPU
at full size, 29 rounds (tokens per row and round 3.67) instead of 95 decode passes.

Predicted on an H100 (launch-bound; 385 launches a target pass, 85 a draft pass): 95 x 385 = 36,600 launches ->
29 x 734 = 21,300, ~1.7x tokens/s. Larger batches gain less: the target pass grows (8 x 5 rows here, still far from
compute-bound at 40 rows) and the slowest row sets the batch's length.
"""

from chapters.ch17.common import K, SpecServe, batch_of_requests, speculative


def get_benchmark() -> SpecServe:
    return SpecServe(batch_of_requests, speculative(K, None), "throughput")
