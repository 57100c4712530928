"""The draft's k passes captured once as a CUDA graph: one replay per round instead of 340 launches.

The one idea: the draft loop has fixed shapes (one token per row, the whole cache length read and masked, the
positions and the drafted tokens in device buffers), so it is captured in set-up and each round replays it; the
target's pass and the acceptance stay eager (their shape follows the rows' positions). Predicted on an H100: the
draft loop ~2 ms of launches -> ~0.8 ms of GPU work (dominated by 4 reads of the 100 MB LM head), a round ~4.6 ->
~3.4 ms: TPOT ~1.35x better. On a CPU there is nothing to capture: the same eager loop runs (no gain).

The same tokens (checked exactly) and the same draft tokens: eager and graph run the same kernels on the same shapes.
"""

from chapters.ch17.common import K, SpecServe, one_at_a_time, speculative


def get_benchmark() -> SpecServe:
    return SpecServe(one_at_a_time, speculative(K, 1, graph=True), "tpot")
