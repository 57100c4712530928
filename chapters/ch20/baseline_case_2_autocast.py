"""Stage 1 of the case study: fp32 tensors, the matmuls as TF32 on the tensor cores; attention written out, AdamW
as a loop, a host sync per step.

Every activation is fp32: each elementwise pass (LayerNorm, GELU, the residual adds; the [8, 12, 1024, 1024]
scores' scale, mask and softmax) moves 4 bytes per element, and the ~19.6 TFLOP of matmuls per call run at the
TF32 rate (403 TFLOP/s peak measured on the H200), half bf16's.

Predicted on an H100 or H200 (not measured): ~0.3-0.4 s per call. Clock: wall.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=1)
