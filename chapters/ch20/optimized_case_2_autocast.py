"""Stage 2: ``torch.autocast(dtype=torch.bfloat16)`` around forward and loss.

The one idea: matmuls (and the written-out attention's two products) in bf16 on the tensor cores; weights,
gradients, the optimizer and the loss stay fp32 (chapter 13's ``amp``).

Predicted on an H100 or H200 (not measured): the matmuls at ~300-450 TFLOP/s, the fp32 score matrices (8 x 12 x
1024² per layer) and the elementwise passes left: ~0.08-0.11 s per call, ~3-4x. Outputs within 5 % (bf16).
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=2)
