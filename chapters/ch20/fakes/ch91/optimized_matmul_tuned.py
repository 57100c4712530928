"""Honest: the configuration Triton's autotuner finds (chapter 20's ``optimized_matmul_search``).

Expected verdict: ok, verified; on an H100 ~1.5-2x faster (chapter 20's prediction).
"""

from chapters.ch20.common import MATMUL_DEFAULT, MATMUL_SPACE, Example, TunedMatmul, search_config
from chapters.ch20.fakes.ch91.common import square


def get_benchmark() -> Example:
    tuned = TunedMatmul(MATMUL_SPACE, MATMUL_DEFAULT, zero=False)
    return Example(square, tuned.launch, tuned.prepare, search_config())
