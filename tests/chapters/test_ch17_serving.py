"""Chapter 17's engines on the CPU (smoke model): speculative decoding gives each request exactly the tokens it
gets decoded alone, whatever the draft proposes, in fewer target passes when the draft agrees; the disaggregated
engine, with both of its "devices" on the CPU and prefills that finish late, gives the same tokens and never
runs a prompt on the decode side. The pair check in test_all_examples only compares two sides with each other."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context
from chapters.ch15.common import Workload, lengths, workload
from chapters.ch17 import common as C
from models import GPT
from models.serving import decode_alone, drive, tokens_of
from tests.models.recorded import assert_recorded_as_alone


@pytest.fixture(autouse=True)
def smoke() -> Iterator[None]:
    set_context(make_context(resolve_config({"smoke": True, "device": "cpu", "seed": 7})))
    yield
    set_context(None)


def alone(w: Workload) -> list[list[int]]:
    return [decode_alone(w.model, r) for r in w.requests]


def serve(w: Workload, engine: Any) -> tuple[list[list[int]], list[dict[int, int]]]:
    steps = drive(engine, w.requests)
    return tokens_of(w.out), steps


@pytest.mark.parametrize("k,batch", [(1, 1), (2, 2), (4, None), (8, 1), (3, 3)])
def test_speculative_gives_each_request_its_own_greedy_tokens(k: int, batch: int | None) -> None:
    w = C.speculative_workload([9, 4, 13, 6, 11], [7, 12, 3, 1, 10])
    engine = C.speculative(k, batch)(w)
    got, steps = serve(w, engine)
    assert got == alone(w)
    assert_recorded_as_alone(w.model, w.requests, w.out)  # the target's runner-up and gap of each kept token
    rows = batch or 5
    batches = -(-5 // rows)
    assert engine.target_passes == len(steps) == batches + engine.rounds  # a prefill per batch, a pass per round
    assert 0 < engine.acceptance_rate <= 1 and 1 < engine.tokens_per_round <= k + 1


def test_fewer_target_passes_than_plain_decoding() -> None:
    w = C.one_at_a_time()
    ref = alone(w)
    _, plain = serve(w, C.plain(1)(w))
    got, spec = serve(w, C.speculative(C.K, 1)(w))
    assert got == ref
    assert len(plain) == sum(r.new_tokens for r in w.requests)  # one pass per token (the first is the prefill's)
    assert len(spec) < 0.6 * len(plain)


def test_scaled_tail_makes_the_draft_agree() -> None:
    """The draft agrees with the target because the target's later blocks move the residual stream little: with
    them at full scale the same draft is accepted far less often (and the tokens are still exact)."""
    rates = {}
    for scale in (1.0, C.TAIL_SCALE):
        w = workload(lengths(6, 4, 12, offset=1), [16] * 6)
        C.scale_tail(w.model, C.draft_layers(), scale)
        engine = C.speculative(4, None)(w)
        got, _ = serve(w, engine)
        assert got == alone(w)
        rates[scale] = engine.acceptance_rate
    assert rates[C.TAIL_SCALE] > rates[1.0] + 0.2, rates


def test_a_draft_that_is_the_target_is_always_accepted() -> None:
    w = C.speculative_workload([5, 8], [11, 11])
    engine = C.SpeculativeEngine(w, w.model.early_exit(w.model.cfg.n_layer), k=3, batch=2)
    got, steps = serve(w, engine)
    assert got == alone(w)
    assert engine.acceptance_rate == 1.0 and engine.tokens_per_round == 4.0
    assert len(steps) == 1 + 3  # the prefill's token, then 4 + 4 + 2 of the remaining 10


def test_a_draft_that_never_agrees_still_gives_the_target_tokens() -> None:
    """A draft from other weights proposes (almost) nothing the target keeps: each round is worth the target's own
    token, and the tokens are still exactly the target's."""
    w = C.speculative_workload([6, 9], [10, 10])
    other = GPT.from_seed(w.model.cfg, 12345, "cpu").early_exit(1)
    engine = C.SpeculativeEngine(w, other, k=4, batch=2)
    got, _ = serve(w, engine)
    assert got == alone(w)
    assert engine.acceptance_rate < 0.2


def test_draft_shares_the_target_cache_and_graph_falls_back_on_cpu() -> None:
    w = C.one_at_a_time()
    engine = C.speculative(C.K, 1, graph=True)(w)
    assert engine.graph is None  # nothing to capture without CUDA: the same eager loop
    assert engine.draft_kv.k.data_ptr() == engine.kv.k.data_ptr()
    assert engine.draft_kv.k.shape[0] == C.draft_layers() < engine.kv.k.shape[0]
    got, _ = serve(w, engine)
    assert got == alone(w)


def test_speculative_engine_errors_name_the_value() -> None:
    w = workload([5, 6], [3, 3], arrivals=[0.0, 4.0])
    with pytest.raises(ValueError, match="request 1 arrives later"):
        C.speculative(2, 1)(w)
    with pytest.raises(ValueError, match="k=0"):
        C.SpeculativeEngine(C.one_at_a_time(), w.model.early_exit(1), k=0, batch=1)


def test_spec_serve_records_the_acceptance() -> None:
    from bench.define.context import context

    s = C.SpecServe(C.one_at_a_time, C.speculative(C.K, 1), "tpot")
    s.setup()
    sizes = context().sizes
    assert sizes["k"] == C.K and 0 < sizes["acceptance_rate"] <= 1 and sizes["draft_graph"] == "eager"
    assert sizes["target_passes"] == s.engine.target_passes < sum(r.new_tokens for r in s.w.requests)
    s.teardown()


# --- disaggregation, both "devices" on the CPU -------------------------------------------------------


class LateLane(C.Lane):
    """A prefill lane whose passes report done only after ``lag`` polls (the work itself is done at once)."""

    def __init__(self, lag: int) -> None:
        super().__init__(torch.device("cpu"))
        self.lag, self.polls, self.waits = lag, {}, 0

    def run(self, fn: Any) -> Any:
        fn()
        handle = object()
        self.polls[handle] = 0
        return handle

    def done(self, handle: Any) -> bool:
        self.polls[handle] += 1
        return self.polls[handle] > self.lag

    def wait(self, handle: Any) -> None:
        self.waits += 1
        self.polls[handle] = self.lag


def arriving() -> Workload:
    n = 8
    return workload(lengths(n, 9, 30, offset=23), lengths(n, 1, 6, offset=24), arrivals=[i * 2.0 for i in range(n)])


def passes(model: GPT) -> list[int]:
    """Record the tokens per row (T) of every forward pass ``model`` runs."""
    seen: list[int] = []
    forward = model.forward
    model.forward = lambda segs, cache=None: seen.extend(s.shape[1] for s in segs) or forward(segs, cache)  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("lag", [0, 1, 4])
def test_disaggregated_engine_gives_the_same_tokens_and_decodes_only(lag: int) -> None:
    w = arriving()
    ref = alone(w)
    prefill_model = C.replica(w.model, torch.device("cpu"))
    decode_t, prefill_t = passes(w.model), passes(prefill_model)
    lane = LateLane(lag)
    engine = C.DisaggregatedEngine(w, prefill_model, slots=3, staging=2, lane=lane)
    got, steps = serve(w, engine)
    assert got == ref
    assert set(decode_t) == {1}  # the decode side never runs a prompt
    assert len(prefill_t) == engine.prefill_passes == engine.handovers == len(w.requests)
    assert sorted(prefill_t) == sorted(r.prompt_tokens for r in w.requests)
    rest = [r.new_tokens - 1 for r in w.requests]  # tokens after the prefill's, one per decode pass they join
    assert max(rest) <= engine.decode_passes <= sum(rest)
    if lag:
        assert lane.waits > 0  # with nothing decoding, a step waits for the prefill in flight
    assert_recorded_as_alone(w.model, w.requests, w.out)  # the first token's from the prefill device


def test_disaggregated_engine_matches_the_colocated_one() -> None:
    w = arriving()
    colocated, _ = serve(w, C.colocated_engine(w))
    disaggregated, _ = serve(w, C.DisaggregatedEngine(w, C.replica(w.model, torch.device("cpu")), 3, 2))
    assert colocated == disaggregated == alone(w)


def test_replica_has_the_same_weights_in_other_memory() -> None:
    w = arriving()
    twin = C.replica(w.model, torch.device("cpu"))
    for (name, a), b in zip(w.model.named_parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr(), name
    assert torch.equal(twin.cos, w.model.cos)


def test_disaggregation_needs_two_gpus() -> None:
    from bench.errors import Skip

    with pytest.raises(Skip, match="CUDA GPU"):
        C.arriving_long_prompts()
