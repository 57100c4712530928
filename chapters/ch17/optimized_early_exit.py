"""Early exit: the head read after layer 8 of 16; a token whose top probability there is >= 0.75 stops with that
answer, the rest go on (gathered, the host waiting to learn how many) and are scattered back.

The one idea: a token the model is already sure of needs no more layers. On the CPU ~66-77 % of the tokens leave
halfway, so the second half runs on about a quarter to a third of them: ~8 + 8 x 0.3 = 10.4 of 16 layers' GEMMs, plus
the halfway head on every token (1/16 of a layer), a softmax and the gather. A lossy trade, verified by its quality
(``verify="quality"``): each token scores 1 when its answer is the fp32 full-depth model's, and this side's mean
must be at least 0.98 of the full-depth side's (measured 0.998-1.0 on the CPU); ``exit_share`` is logged.

Predicted on an H200 (not measured): ~10.5/16 of the baseline's GEMMs plus a sync (~50 µs): ~5.5-6.5 ms against
~8-9 ms, ~1.4-1.5x, at ~0.998 of its quality.
"""

from chapters.ch17.early_exit import EarlyExit


def get_benchmark() -> EarlyExit:
    return EarlyExit(exits=True)
