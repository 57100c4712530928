"""Shared by the engine tests: what an engine records beside its tokens (``models.serving.Output``: each token's
runner-up and gap) must be what the request decoded alone gives at that step."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from models import GPT
from models.gpt import Top2
from models.serving import Output, Request, decode_alone_top2, tokens_of


def assert_recorded_as_alone(model: GPT, requests: Sequence[Request], out: Output,
                             ref: Sequence[Top2] | None = None) -> None:  # fmt: skip
    """Tokens and runner-ups exactly, gaps to fp32 rounding (a batched step's logits differ by ~1e-6 of their
    spread from the request's own), against each request decoded alone (``ref``: ``decode_alone_top2`` of each
    request, made by the caller from the same model and requests)."""
    ref = ref if ref is not None else [decode_alone_top2(model, r) for r in requests]
    assert tokens_of(out) == [t.token.tolist() for t in ref]
    assert tokens_of(out, "runner_up") == [t.runner_up.tolist() for t in ref]
    for got, want in zip(tokens_of(out, "gap"), ref, strict=True):
        assert got == pytest.approx(want.gap.tolist(), rel=1e-3, abs=1e-4)
    assert all(g > 0 for row in tokens_of(out, "gap") for g in row)  # written, not a poison or a zero
