"""Stage 5 of the case study: compiled; each step's batch copied from pageable memory and its loss read on the
host.

The copy from pageable memory and ``loss.item()`` each make the host wait for the GPU once per step; the GPU then
idles until the host has launched the next step's first kernels.

Predicted on an H100 or H200 (not measured): ~40-50 ms per call. Clock: wall.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=5)
