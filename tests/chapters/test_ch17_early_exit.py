"""Chapter 17's early exit (chapters/ch17/early_exit.py): the trade it claims holds at smoke size, and the quality
floor it is verified at catches an exit rule that ignores confidence."""

from __future__ import annotations

import pytest
import torch

from chapters.ch17 import early_exit as E


def quality(exits: bool) -> tuple[float, E.EarlyExit]:
    b = E.EarlyExit(exits)
    b.setup()
    b.benchmark_fn()
    scores = b.metrics()["quality"]
    assert len(scores) == b.pred.numel() and set(scores) <= {0.0, 1.0}
    return sum(scores) / len(scores), b


def test_early_exit_leaves_most_tokens_halfway_within_its_floor(cpu_smoke: None) -> None:
    full, _ = quality(False)
    early, b = quality(True)
    share = 1 - b.rest / b.pred.numel()
    assert 0.4 < share < 0.95  # most tokens leave halfway, not all
    assert full > 0.95 and early / full >= E.QUALITY_FLOOR + 0.01  # the floor keeps a margin over what is measured


def test_exiting_without_confidence_falls_below_the_floor(cpu_smoke: None, monkeypatch: pytest.MonkeyPatch) -> None:
    full, _ = quality(False)
    monkeypatch.setattr(E, "THRESHOLD", 0.0)  # every token leaves halfway, sure or not
    early, b = quality(True)
    assert b.rest == 0 and early / full < E.QUALITY_FLOOR


def test_full_depth_answers_follow_the_inputs(cpu_smoke: None) -> None:
    _, b = quality(False)
    before = b.pred.clone()
    b.x.copy_(torch.roll(b.x, 1, dims=0))
    b.benchmark_fn()
    assert torch.equal(b.pred, torch.roll(before, 1))  # per-token answers: a permuted batch, permuted answers
