"""Stage 2 of the case study: bf16 autocast, attention still written out (scores materialised and masked).

Per layer and step the [8, 12, 1024, 1024] scores are written and read several times (the product, the scale,
the mask, the softmax; their gradients in the backward): ~0.4 GB per layer in the forward alone.

Predicted on an H100 or H200 (not measured): ~0.08-0.11 s per call. Clock: wall.
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=2)
