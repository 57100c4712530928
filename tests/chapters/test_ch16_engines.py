"""Chapter 16's pairs at smoke size on the CPU: each optimized engine's schedule shows its one idea (more requests
at once, bounded steps, fewer prefilled tokens, short requests first) while every request gets exactly the tokens
the baseline gives it. Times mean nothing here; step counts and token counts do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context
from chapters.ch15.common import Workload
from chapters.ch16 import common as ch16
from models.serving import ContinuousEngine, drive


@pytest.fixture(autouse=True)
def smoke() -> Iterator[None]:
    set_context(make_context(resolve_config({"smoke": True, "device": "cpu", "seed": 9})))
    yield
    set_context(None)


def serve(w: Workload, engine: ContinuousEngine) -> dict[str, Any]:
    """One generation on a clock of 1 ms per step; the tokens, steps, tokens per pass, first-token step."""
    passes: list[int] = []
    forward = engine.model.forward
    engine.model = lambda segs, cache=None: passes.append(sum(s.tokens.numel() for s in segs)) or forward(segs, cache)  # type: ignore[assignment]
    steps = drive(engine, w.requests)
    first = [next(i for i, res in enumerate(steps) if res.get(rid)) for rid in range(len(w.requests))]
    ttft = sorted(first)  # in steps; every request of these pairs arrives at once
    return {
        "tokens": w.out.tokens.clone(),
        "steps": len(steps),
        "passes": passes,
        "ttft": ttft[len(ttft) // 2],
        "peak": engine.peak_running,
        "prefilled": engine.prefilled,
    }


def pair(make: Any, baseline: Any, optimized: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    w = make()
    b = serve(w, baseline(w))
    o = serve(w, optimized(w))
    assert (b["tokens"] == o["tokens"]).all()
    return b, o


def test_paged_cache_runs_more_requests_in_the_same_bytes() -> None:
    b, o = pair(ch16.paged_requests, ch16.contiguous_engine, ch16.paged_engine)
    w = ch16.paged_requests()
    assert ch16.paged_engine(w).kv.nbytes == ch16.contiguous_engine(w).kv.nbytes + ch16.paged_engine(w).kv.nbytes // (
        2 * 512 // 4 + 1
    )  # the same positions, plus the null block
    assert b["peak"] == 2 and o["peak"] == len(w.requests)
    assert o["steps"] < b["steps"] / 2


def test_chunked_prefill_bounds_every_pass() -> None:
    b, o = pair(ch16.arriving_long_prompts, ch16.prefill_first_engine, ch16.chunked_engine)
    assert max(o["passes"]) <= 7 < max(b["passes"])


def test_prefix_sharing_prefills_the_prefix_once() -> None:
    b, o = pair(ch16.shared_prefix, lambda w: ch16.prefix_engine(w, False), lambda w: ch16.prefix_engine(w, True))
    w = ch16.shared_prefix()
    n = len(w.requests)
    assert o["prefilled"] == b["prefilled"] - (n - 1) * 8  # 2 blocks of 4 prefix tokens not recomputed
    assert ch16.prefix_engine(w, True).kv_bytes_to_hold_all() < ch16.prefix_engine(w, False).kv_bytes_to_hold_all()


def test_shortest_first_cuts_the_median_wait() -> None:
    b, o = pair(ch16.convoy, lambda w: ch16.scheduled_engine(w, "fcfs"), lambda w: ch16.scheduled_engine(w, "sjf"))
    assert o["ttft"] < b["ttft"] / 2
    assert abs(o["steps"] - b["steps"]) <= 3  # the same work, reordered
