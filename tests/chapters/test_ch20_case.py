"""Chapter 20's case study (chapters/ch20/case.py): neighbouring stages agree within the tolerance, and a stage
whose optimizer did nothing would not."""

from __future__ import annotations

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context
from chapters.ch20.case import RTOL, STAGES, CaseStudy


def losses(stage: int, skip_step: bool = False) -> torch.Tensor:
    c = CaseStudy(stage)
    c.setup()
    if skip_step:
        c.opt.step = lambda *a, **k: None  # type: ignore[method-assign]
    c.benchmark_fn()
    out = c.get_output()[0].clone()
    c.teardown()
    return out


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_eager_stages_agree_and_a_skipped_step_does_not(cpu_smoke: None) -> None:
    out = [losses(k) for k in range(5)]  # the eager stages (5 and 6 compile: the chapter's smoke run covers them)
    # A CPU has no TF32: the tf32 stage's switch changes nothing here, so its pair is checked on a GPU only (TF32's
    # rounding, emulated on the CPU, moves these losses by 9e-6 to 3e-5: case.py's RTOL comment).
    assert torch.equal(out[1], out[0])
    for k in range(2, 5):
        assert rel(out[k], out[k - 1]) < RTOL / 10
    assert rel(losses(4, skip_step=True), out[4]) > 2 * RTOL


def _tf32_stages(expect_set: bool) -> None:
    """Stages 0-2 set up (twice each, as the harness may) and torn down: TF32 switched on from stage 1 when
    ``expect_set``, and the caller's settings back after each teardown."""
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("medium")  # whatever the caller had: teardown gives it back
    torch.backends.cudnn.allow_tf32 = False
    try:
        draft = CaseStudy(0)
        draft.setup()
        assert torch.get_float32_matmul_precision() == "medium" and draft.get_work()["dtype"] == "fp32"
        draft.teardown()
        for stage, dtype in ((1, "tf32" if expect_set else "fp32"), (2, "bf16")):
            c = CaseStudy(stage)
            for _ in range(2):
                c.setup()
                if expect_set:
                    assert torch.get_float32_matmul_precision() == "high" and torch.backends.cuda.matmul.allow_tf32
                    assert torch.backends.cudnn.allow_tf32
                else:  # a CPU has no TF32: the switch left alone
                    assert torch.get_float32_matmul_precision() == "medium" and not torch.backends.cudnn.allow_tf32
                assert c.get_work()["dtype"] == dtype
                c.teardown()
                assert torch.get_float32_matmul_precision() == "medium" and not torch.backends.cudnn.allow_tf32
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


def test_tf32_left_alone_on_a_cpu_and_the_callers_settings_kept(cpu_smoke: None) -> None:
    _tf32_stages(expect_set=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (TF32 is switched on there only)")
def test_tf32_is_set_in_setup_on_a_gpu_and_the_callers_settings_restored() -> None:
    set_context(make_context(resolve_config({"device": "cuda", "smoke": True})))  # the tiny LM, on the GPU
    try:
        _tf32_stages(expect_set=True)
    finally:
        set_context(None)


def test_stage_names_and_bounds() -> None:
    assert len(STAGES) == 7 and STAGES[1] == "tf32" and STAGES[-1] == "no_sync"
    with pytest.raises(ValueError, match=r"stage=7 is not one of 0\.\.6"):
        CaseStudy(7)
    assert CaseStudy(4).get_config().setup_timeout_seconds < CaseStudy(5).get_config().setup_timeout_seconds
    # the small last step's pair may take its 8 rounds (the no_sync side's config sets them)
    assert CaseStudy(6).get_config().max_rounds_seconds > 2 * CaseStudy(5).get_config().max_rounds_seconds
