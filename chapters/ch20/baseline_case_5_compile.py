"""Stage 4 of the case study: bf16, flash attention, fused AdamW; the forward and loss in eager PyTorch.

Eager, each LayerNorm, GELU, residual add, cast and the cross-entropy is its own kernel (and its own pass over
memory), forward and backward: ~30 elementwise passes per layer.

Predicted on an H100 or H200 (not measured): ~50-65 ms per call. Clock: wall.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=4)
