"""The draft training step of the case study (stage 0), against the last stage.

As ``case_1_tf32``'s baseline: fp32, attention written out, AdamW as a loop, a host sync per step.

Predicted on an H100 or H200 (not measured): ~0.3-0.35 s per call. Clock: wall.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=0)
