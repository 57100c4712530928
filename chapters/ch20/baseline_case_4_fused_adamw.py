"""Stage 3 of the case study: bf16, flash attention; AdamW still a Python loop over 149 parameter tensors.

``AdamW(foreach=False)``: ~8 kernels per tensor per step, ~2,400 launches per call (chapter 13's ``optimizer``).

Predicted on an H100 or H200 (not measured): ~0.06-0.08 s per call. Clock: wall.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=3)
