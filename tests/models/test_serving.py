"""models.serving on the CPU: every engine configuration generates, for every request, the tokens that request
gets when decoded alone; capacity, chunking and prefix sharing change the schedule, not the tokens."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from models import GPT, preset
from models.gpt import Top2
from models.serving import (
    ContinuousEngine,
    Output,
    Request,
    decode_alone,
    decode_alone_top2,
    generation_flops,
    make_requests,
    tokens_of,
)
from models.serving import drive as run
from tests.models.recorded import assert_recorded_as_alone


@pytest.fixture(scope="module")
def model() -> GPT:
    return GPT.from_seed(preset("smoke"), 0, "cpu")


def alone(model: GPT, r: Request) -> list[int]:
    return decode_alone(model, r)


def drive(engine: ContinuousEngine, requests: list[Request]) -> tuple[list[list[int]], list[dict[int, int]]]:
    """Run a generation as bench.measure.generation does, with 1 ms per step and jumps to the next arrival."""
    steps = run(engine, requests)
    return tokens_of(engine.out), steps


def requests(prefix: int = 0, arrivals: bool = False) -> list[Request]:
    lens = [prefix + n for n in (7, 3, 12, 5, 9, 4, 11)]
    new = [6, 2, 9, 4, 1, 7, 3]
    times = [0.0, 0.0, 2.0, 3.0, 3.0, 20.0, 21.5] if arrivals else None
    return make_requests(256, lens, new, "cpu", seed=3, arrivals=times, prefix=prefix)


CONFIGS: dict[str, dict[str, Any]] = {
    "contiguous": {"cache": "contiguous", "max_running": 3, "max_seq": 24},
    "contiguous_sjf": {"cache": "contiguous", "max_running": 3, "max_seq": 24, "policy": "sjf"},
    "contiguous_budget": {"cache": "contiguous", "max_running": 4, "max_seq": 24, "prefill_budget": 10},
    "paged": {"cache": "paged", "max_running": 5, "n_blocks": 12, "block_size": 4},
    "chunked": {"cache": "contiguous", "max_running": 3, "max_seq": 24, "chunk": 7},
    "chunked_paged": {"cache": "paged", "max_running": 3, "n_blocks": 30, "block_size": 4, "chunk": 5},
}


@pytest.fixture(scope="module")
def alone_top2(model: GPT) -> dict[bool, list[Top2]]:
    """Each request of ``requests(arrivals=...)`` decoded alone (its tokens, runner-ups and gaps): every engine's
    reference, decoded once for the module's engines, not once per engine (two thirds of each test's time)."""
    return {arrivals: [decode_alone_top2(model, r) for r in requests(arrivals=arrivals)] for arrivals in (False, True)}


@pytest.mark.parametrize("arrivals", [False, True], ids=["burst", "arrivals"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_engine_gives_each_request_its_own_tokens(model: GPT, alone_top2: dict[bool, list[Top2]], name: str,
                                                        arrivals: bool) -> None:  # fmt: skip
    reqs = requests(arrivals=arrivals)
    engine = ContinuousEngine(model, reqs, Output(reqs, "cpu"), **CONFIGS[name])
    got, steps = drive(engine, reqs)
    ref = alone_top2[arrivals]
    assert got == [t.token.tolist() for t in ref]
    assert_recorded_as_alone(model, reqs, engine.out, ref)  # each token's runner-up and gap beside it
    emitted = [sum(s.get(i, 0) for s in steps) for i in range(len(reqs))]
    assert emitted == [r.new_tokens for r in reqs]
    assert engine.peak_running <= CONFIGS[name]["max_running"]


def test_paged_pool_holds_more_requests_than_slots_of_the_same_bytes(model: GPT) -> None:
    """24 x 3 contiguous positions against 18 blocks of 4 (the same 72): by real length, 5 run at once."""
    reqs = requests()
    contiguous = ContinuousEngine(model, reqs, Output(reqs, "cpu"), cache="contiguous", max_running=3, max_seq=24)
    paged = ContinuousEngine(model, reqs, Output(reqs, "cpu"), cache="paged", max_running=7, n_blocks=19, block_size=4)
    assert contiguous.kv.nbytes == paged.kv.nbytes - paged.kv.nbytes // 19  # block 0 is the null block
    steps_c, steps_p = len(drive(contiguous, reqs)[1]), len(drive(paged, reqs)[1])
    assert paged.peak_running > contiguous.peak_running == 3
    assert steps_p < steps_c


def test_prefix_cache_shares_blocks_and_computes_fewer_tokens(model: GPT) -> None:
    reqs = requests(prefix=10)  # 10 shared tokens: two full blocks of 4 shared, the rest recomputed
    seen: list[int] = []

    def counting(engine: ContinuousEngine) -> None:
        forward = engine.model.forward

        def wrapped(segments: Any, cache: Any = None) -> torch.Tensor:
            seen.append(sum(s.tokens.numel() for s in segments))
            return forward(segments, cache)

        engine.model = wrapped  # type: ignore[assignment]

    for share in (False, True):
        options: dict[str, Any] = {"cache": "paged", "max_running": 7, "n_blocks": 40, "block_size": 4}
        engine = ContinuousEngine(model, reqs, Output(reqs, "cpu"), **options, prefix_cache=share)
        counting(engine)
        seen.clear()
        got, steps = drive(engine, reqs)
        assert got == [alone(model, r) for r in reqs], f"prefix_cache={share}"
        if share:
            assert steps[0] == {0: 1}  # the first request alone; the others wait one step to share its blocks
            shared = engine.keys[0][:2]
            assert all(k[:2] == shared and k[2:3] != shared[1:] for k in engine.keys)
            assert all(key in engine.prefixes for key in shared)
            shared_total = sum(seen)
        else:
            plain_total = sum(seen)
    assert shared_total < plain_total


def test_generation_flops_counts_each_token_once(model: GPT) -> None:
    cfg = model.cfg
    r = make_requests(256, [5], [3], "cpu", seed=0)
    # 7 tokens pass the model (5 prompt + 2 fed back), 3 LM-head rows, 28 causal pairs
    assert generation_flops(model, r) == cfg.flops(7, 3, 28)
    two = make_requests(256, [6, 6], [1, 1], "cpu", seed=0, prefix=4)
    assert generation_flops(model, two, shared_prefix=4) == 2 * cfg.flops(2, 1, 21 - 10) + cfg.flops(4, 0, 10)


def test_bad_options_are_named(model: GPT) -> None:
    reqs = requests()
    out = Output(reqs, "cpu")
    with pytest.raises(ValueError, match="max_seq=10 is shorter than the longest request \\(21\\)"):
        ContinuousEngine(model, reqs, out, cache="contiguous", max_running=2, max_seq=10)
    with pytest.raises(ValueError, match="policy='lifo'"):
        ContinuousEngine(model, reqs, out, cache="contiguous", max_running=2, max_seq=30, policy="lifo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix_cache needs cache='paged'"):
        ContinuousEngine(model, reqs, out, cache="contiguous", max_running=2, max_seq=30, prefix_cache=True)
    with pytest.raises(ValueError, match="cannot hold one request of 6 blocks"):
        ContinuousEngine(model, reqs, out, cache="paged", max_running=2, n_blocks=5, block_size=4)


def test_shortest_job_first_admits_by_tokens_to_generate(model: GPT) -> None:
    reqs = requests()  # new tokens 6, 2, 9, 4, 1, 7, 3
    engine = ContinuousEngine(
        model, reqs, Output(reqs, "cpu"), cache="contiguous", max_running=3, max_seq=24, policy="sjf"
    )
    _, steps = drive(engine, reqs)
    assert sorted(steps[0]) == [1, 4, 6]  # 2, 1 and 3 tokens: the three shortest first


def test_chunked_steps_stay_within_the_token_budget(model: GPT) -> None:
    reqs = requests()
    engine = ContinuousEngine(model, reqs, Output(reqs, "cpu"), cache="contiguous", max_running=3, max_seq=24, chunk=7)
    sizes: list[int] = []
    forward = engine.model.forward
    engine.model = lambda segs, cache=None: sizes.append(sum(s.tokens.numel() for s in segs)) or forward(segs, cache)  # type: ignore[assignment]
    got, _ = drive(engine, reqs)
    assert max(sizes) <= 7 and sum(sizes) == sum(r.prompt_tokens + r.new_tokens - 1 for r in reqs)  # no padding
    assert got == [alone(model, r) for r in reqs]


def test_kv_bytes_to_hold_every_request(model: GPT) -> None:
    reqs = requests(prefix=10)  # prompts 17..22 tokens, 1..9 new
    per_token = model.cfg.kv_bytes_per_token
    contiguous = ContinuousEngine(model, reqs, Output(reqs, "cpu"), cache="contiguous", max_running=2, max_seq=40)
    assert contiguous.kv_bytes_to_hold_all() == 7 * 40 * per_token
    options: dict[str, Any] = {"cache": "paged", "max_running": 7, "n_blocks": 60, "block_size": 4}
    paged = ContinuousEngine(model, reqs, Output(reqs, "cpu"), **options)
    blocks = sum(-(-(r.prompt_tokens + r.new_tokens) // 4) for r in reqs)
    assert paged.kv_bytes_to_hold_all() == blocks * 4 * per_token
    shared = ContinuousEngine(model, reqs, Output(reqs, "cpu"), **options, prefix_cache=True)
    assert shared.kv_bytes_to_hold_all() == (blocks - 2 * 6) * 4 * per_token  # 2 prefix blocks held once, not 7x
