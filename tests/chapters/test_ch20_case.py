"""Chapter 20's case study (chapters/ch20/case.py): neighbouring stages agree within the tolerance, and a stage
whose optimizer did nothing would not."""

from __future__ import annotations

import pytest
import torch

from chapters.ch20.case import RTOL, STAGES, CaseStudy


def losses(stage: int, skip_step: bool = False) -> torch.Tensor:
    c = CaseStudy(stage)
    c.setup()
    if skip_step:
        c.opt.step = lambda *a, **k: None  # type: ignore[method-assign]
    c.benchmark_fn()
    return c.get_output()[0].clone()


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_eager_stages_agree_and_a_skipped_step_does_not(cpu_smoke: None) -> None:
    out = [losses(k) for k in range(4)]  # the eager stages (4 and 5 compile: the chapter's smoke run covers them)
    for k in range(1, 4):
        assert rel(out[k], out[k - 1]) < RTOL / 10
    assert rel(losses(3, skip_step=True), out[3]) > 2 * RTOL


def test_stage_names_and_bounds() -> None:
    assert len(STAGES) == 6
    with pytest.raises(ValueError, match="stage=6 is not one of 0..5"):
        CaseStudy(6)
    assert CaseStudy(3).get_config().setup_timeout_seconds < CaseStudy(4).get_config().setup_timeout_seconds
    # the small last step's pair may take its 8 rounds (the optimized side's config sets them)
    assert CaseStudy(5).get_config().max_rounds_seconds > 2 * CaseStudy(4).get_config().max_rounds_seconds
