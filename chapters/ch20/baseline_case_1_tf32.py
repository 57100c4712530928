"""The draft training step: fp32 everywhere, attention written out, AdamW as a loop, a host sync per step.

Stage 0 of chapter 20's case study (chapters/ch20/case.py): GPT-2 small, 3 steps of 8 x 1024 tokens. In fp32
every matmul runs on the CUDA cores (~51 TFLOP/s measured on the H100 for 8192³): ~19.6 TFLOP of matmuls per call
(ch13's ``lm_flops``), ~0.38 s at that rate.

Predicted on an H100 or H200 (not measured), when this said 2 steps and ~12.5 TFLOP: ~0.3-0.35 s per call.
Clock: wall.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=0)
