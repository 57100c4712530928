"""Chapter 1's shared shells: every call does the same work, whatever the previous call left behind.

The harness compares the *last* call's output and NaN-poisons outputs before the timed calls; the
training step mutates its weights, so it must restore them at the start of every call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.define.protocol import load_benchmark

CH01 = Path(__file__).resolve().parents[2] / "chapters" / "ch01"

pytestmark = pytest.mark.usefixtures("cpu_smoke")  # tests/chapters/conftest.py


def outputs(bench) -> list[torch.Tensor]:
    out = bench.get_output()
    return [t.detach().clone() for t in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_training_step_restarts_from_the_initial_weights(variant: str) -> None:
    bench = load_benchmark(CH01 / f"{variant}_training_step.py")
    bench.setup()
    try:
        bench.benchmark_fn()
        first = outputs(bench)
        losses, *params = bench.get_output()
        assert losses.unique().numel() == losses.numel()  # each step saw a different batch
        for t in bench.get_output():  # what the harness does before the timed calls
            t.fill_(float("nan"))
        bench.benchmark_fn()
        for a, b in zip(first, outputs(bench), strict=True):
            assert torch.equal(a, b)
        assert not any(torch.equal(p, p0) for p, p0 in zip(params, bench.init, strict=True))  # it trained
    finally:
        bench.teardown()


@pytest.mark.parametrize("example", ["goodput", "cuda_graph"])
def test_repeated_calls_rewrite_the_output(example: str) -> None:
    bench = load_benchmark(CH01 / f"optimized_{example}.py")
    bench.setup()
    try:
        bench.benchmark_fn()
        first = outputs(bench)[0]
        bench.get_output().fill_(float("nan"))
        bench.benchmark_fn()
        assert torch.equal(bench.get_output(), first)
    finally:
        bench.teardown()
