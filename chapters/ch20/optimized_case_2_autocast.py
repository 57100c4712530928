"""Stage 2: ``torch.autocast(dtype=torch.bfloat16)`` around forward and loss.

The one idea: matmuls (and the written-out attention's two products) in bf16 on the tensor cores, at twice TF32's
rate, their outputs half the bytes for the elementwise passes that read them; weights, gradients, the optimizer
and the loss stay fp32 (chapter 13's ``amp``). TF32 stays allowed and has no fp32 matmul left to act on.

Predicted on an H100 or H200 (not measured against stage 1): ~0.2-0.23 s per call (this program, TF32 switch
aside, is the stage that measured 0.22 s on an H200 against the fp32 draft: README), ~1.4-1.8x. Outputs within
5 % (bf16).
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=2)
