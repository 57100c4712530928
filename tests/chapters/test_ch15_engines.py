"""Chapter 15's engines against each request decoded alone (smoke model, CPU): every engine, batching and
prefilling its own way, must give each request exactly its own greedy tokens; the pair check in
test_all_examples only compares the two sides with each other."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context
from chapters.ch15.common import (
    GraphDecodeEngine,
    RecomputeEngine,
    Serve,
    StaticEngine,
    TokenByTokenEngine,
    Workload,
    workload,
)
from models.serving import Request, decode_alone, drive, tokens_of
from tests.models.recorded import assert_recorded_as_alone


@pytest.fixture(autouse=True)
def smoke() -> Iterator[None]:
    set_context(make_context(resolve_config({"smoke": True, "device": "cpu", "seed": 5})))
    yield
    set_context(None)


def alone(w: Workload, r: Request) -> list[int]:
    return decode_alone(w.model, r)


def run(w: Workload, engine: Any) -> tuple[list[list[int]], int]:
    steps = drive(engine, w.requests)
    return tokens_of(w.out), len(steps)


ENGINES = {
    "recompute": RecomputeEngine,
    "static_all": lambda w: StaticEngine(w, batch=len(w.requests)),
    "static_2": lambda w: StaticEngine(w, batch=2),
    "token_by_token": TokenByTokenEngine,
}


@pytest.mark.parametrize("name", list(ENGINES))
def test_engine_gives_each_request_its_own_tokens(name: str) -> None:
    w = workload([9, 4, 13, 6, 11], [5, 8, 3, 1, 6])
    got, _ = run(w, ENGINES[name](w))
    assert got == [alone(w, r) for r in w.requests]
    assert_recorded_as_alone(w.model, w.requests, w.out)  # each token's runner-up and gap beside it


def test_graph_decode_engine_eager_gives_the_same_tokens() -> None:
    w = workload([9, 4, 13], [6, 6, 6])
    got, steps = run(w, GraphDecodeEngine(w, graph=True))  # no CUDA here: eager, the same step function
    assert got == [alone(w, r) for r in w.requests] and steps == 6
    assert_recorded_as_alone(w.model, w.requests, w.out)  # through the device-side columns too
    with pytest.raises(ValueError, match="the same new_tokens"):
        GraphDecodeEngine(workload([3, 4], [2, 3]), graph=False)


def test_static_batches_wait_for_their_members_and_pad_to_the_longest() -> None:
    w = workload([5, 6, 7, 8], [2, 6, 3, 1], arrivals=[0.0, 0.0, 50.0, 60.0])
    engine = StaticEngine(w, batch=2)
    got, steps = run(w, engine)
    assert got == [alone(w, r) for r in w.requests]
    assert steps == 6 + 3  # batch 1 runs to its longest (6 tokens), batch 2 (arrived by 60) to 3
    with pytest.raises(ValueError, match="RecomputeEngine serves every request from the start; request 2"):
        RecomputeEngine(w)


def test_token_by_token_needs_a_step_per_prompt_position() -> None:
    w = workload([9, 4, 13], [2, 5, 1])
    _, steps = run(w, TokenByTokenEngine(w))
    assert steps == max(p + n - 1 for p, n in zip([9, 4, 13], [2, 5, 1], strict=True))  # 13
    _, one_pass = run(w, StaticEngine(w, batch=3))
    assert one_pass == 5


def test_serve_speaks_the_generation_protocol() -> None:
    from bench.measure.generation import check_greedy_output, is_generating, read_requests

    s = Serve(lambda: workload([5, 7], [3, 2]), TokenByTokenEngine, "ttft")
    s.setup()
    assert is_generating(s) and s.speedup_metric() == "ttft"
    assert [r.new_tokens for r in read_requests(s)] == [3, 2]
    assert s.get_config().verify == "greedy_tokens"
    check_greedy_output(s.get_output(), read_requests(s))  # tokens, runner-ups, gaps, the requests' offsets
    s.benchmark_fn()
    first = [t.clone() for t in s.get_output()]
    assert s.get_work()["flops"] > 0 and math.isfinite(s.get_work()["flops"])
    s.start_generation()
    while s.generate_step(0.0) is not None:
        pass
    assert all(torch.equal(a, b) for a, b in zip(s.get_output(), first, strict=True))
    assert first[3].tolist() == [0, 3, 5]
    s.teardown()
