"""Causal attention skipping the fully masked tiles: each block of queries stops at its diagonal.

The one idea: a tile of keys entirely after a block's last query contributes exactly zero, so it is never
loaded; a tile entirely before its first query needs no mask at all; only the diagonal tiles are masked
(common.attn_fwd, MODE=CAUSAL_SKIP: two loops, as the Triton tutorial's STAGE 1 / 2). Query block m (of 64) walks
2m + 2 key tiles instead of 128: 4,160 tile visits instead of 8,192 (51 %), and no where() on most of them.

Predicted on an H100: ~4.9 ms -> ~2.5 ms, ~1.9-2x; useful ~440 TFLOP/s (~58 % of the bf16 peak). Same kernel,
same tiles and the same arithmetic on every tile both sides compute (the skipped tiles added exact zeros):
the outputs agree bit for bit in the interpreter.
"""

from chapters.ch18.common import CAUSAL_SKIP, Attention, causal_problem, flash, flash_tiles


def get_benchmark() -> Attention:
    return Attention(causal_problem, flash(CAUSAL_SKIP), prepare=flash_tiles)
