"""Stage 6 of the case study: every change of stages 1-6 together.

TF32 allowed, bf16 autocast, flash attention, fused AdamW, the forward and loss compiled, no per-step sync. The
product of the six steps' speedups, measured here in one pair. Under autocast no fp32 matmul is left for TF32:
this is the program the last stage was before the tf32 stage came first.

Predicted on an H100 or H200 (not measured): ~6-8x (made before the tf32 stage; it changes nothing here).
Outputs (the losses) within 0.5 %.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=6)
