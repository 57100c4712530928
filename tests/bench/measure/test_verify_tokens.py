"""bench/measure/verify.py, ``verify="greedy_tokens"``: generated tokens compared exactly, except that a request
may part from the baseline's at the baseline's near-tie, to the baseline's runner-up; the optimized side's own
runner-ups and gaps are never trusted; more than a quarter of the requests parting is a mismatch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.result import OutputInfo, Recheck
from bench.errors import ConfigError
from bench.measure.compare import compare
from bench.measure.verify import GAP_TOL, compare_tensors
from tests.bench.measure.test_compare import variant

LENGTHS = [20, 12, 25, 18, 30, 9, 22, 24]  # 8 requests, 160 tokens


def generated(seed: int = 0) -> list[torch.Tensor]:
    """A baseline's [tokens, runner_up, gap, offsets]: random tokens, runner-ups other than them, gaps of 0.01-1."""
    gen = torch.Generator().manual_seed(seed)
    n = sum(LENGTHS)
    tokens = torch.randint(0, 1000, (n,), generator=gen)
    runner_up = (tokens + torch.randint(1, 999, (n,), generator=gen)) % 1000
    gap = 0.01 + torch.rand(n, generator=gen, dtype=torch.float32)
    offsets = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int64)
    return [tokens, runner_up, gap, offsets]


def start(r: int, k: int) -> int:
    return sum(LENGTHS[:r]) + k


def part(out: list[torch.Tensor], r: int, k: int, token: int | None = None) -> None:
    """Request ``r`` of ``out`` takes ``token`` (default: the runner-up in ``out``) at its token ``k``, and
    something else from there on (a diverged request's tail: whatever the other engine then generated)."""
    i, end = start(r, k), start(r + 1, 0)
    out[0][i] = out[1][i] if token is None else token
    out[0][i + 1 : end] = (out[0][i + 1 : end] + 7) % 1000


def opt_of(ref: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.clone() for t in ref]


def greedy(ref: list[torch.Tensor], out: list[torch.Tensor]):  # type: ignore[no-untyped-def]
    return compare_tensors(ref, out, None, "greedy_tokens")


def test_equal_tokens_match_and_say_how_many() -> None:
    ref = generated()
    v = greedy(ref, opt_of(ref))
    assert v.verified and v.outcome == "match" and v.detail == "tokens equal: 160 tokens of 8 requests"


def test_a_divergence_at_a_near_tie_to_the_runner_up_is_accepted_and_the_rest_not_compared() -> None:
    ref = generated()
    ref[2][start(2, 5)] = 3e-6  # the baseline's top two 3e-6 of its spread apart at request 2's token 5
    out = opt_of(ref)
    part(out, 2, 5)
    v = greedy(ref, out)
    assert v.verified and v.outcome == "match", v.detail
    assert v.detail == (
        "tokens equal; 1 of 8 requests diverged at a near-tie (gap 3.0e-06 <= 1e-04), request 2 at token 5, and "
        "was compared up to there (141 of 160 tokens)"
    )
    exact = compare_tensors(ref, out, None)  # the same outputs, each tensor exactly: the divergence fails
    assert not exact.verified and "20 of 160 entries differ" in exact.detail


def test_a_divergence_at_a_large_gap_is_a_mismatch() -> None:
    ref = generated()
    out = opt_of(ref)
    part(out, 2, 5)  # the runner-up, but the baseline's top two were far apart
    v = greedy(ref, out)
    assert not v.verified and v.outcome == "mismatch"
    assert v.detail.startswith("request 2 parts from the baseline's tokens at token 5: baseline ")
    assert "of its logits' spread apart, more than a near-tie (1e-04); 20 of 160 tokens differ" in v.detail


def test_a_near_tie_to_another_token_than_the_runner_up_is_a_mismatch() -> None:
    ref = generated()
    i = start(4, 0)
    ref[2][i] = 1e-6
    out = opt_of(ref)
    other = next(t for t in range(1000) if t not in (int(ref[0][i]), int(ref[1][i])))
    part(out, 4, 0, token=other)
    v = greedy(ref, out)
    assert not v.verified and v.outcome == "mismatch"
    head = f"request 4 parts from the baseline's tokens at token 0: baseline {int(ref[0][i])}, optimized {other}"
    assert v.detail.startswith(head)
    assert f"a near-tie (gap 1.0e-06), but not to the baseline's runner-up {int(ref[1][i])}" in v.detail


def test_the_optimized_sides_own_gaps_and_runner_ups_are_never_read() -> None:
    """A cheat that writes gap 0 and its own token as its runner-up everywhere gains nothing: the baseline's
    decide. And a baseline near-tie is accepted whatever the optimized side wrote there."""
    ref = generated()
    out = opt_of(ref)
    part(out, 1, 3, token=(int(ref[0][start(1, 3)]) + 1) % 1000)
    out[1].copy_(out[0])
    out[2].zero_()
    v = greedy(ref, out)
    assert not v.verified and "more than a near-tie" in v.detail
    ref[2][start(1, 3)] = 5e-5
    ref[1][start(1, 3)] = out[0][start(1, 3)]
    out[2].fill_(float("nan"))
    out[1].fill_(-1)
    assert greedy(ref, out).verified


def test_more_than_a_quarter_of_the_requests_parting_is_a_mismatch() -> None:
    ref = generated()
    out = opt_of(ref)
    for r, k in ((0, 4), (3, 0), (6, 10)):
        ref[2][start(r, k)] = GAP_TOL / 2
        part(out, r, k)
    v = greedy(ref, out)
    assert not v.verified and v.outcome == "mismatch"
    assert v.detail == (
        "3 of 8 requests part from the baseline's tokens, each at a near-tie (gap <= 1e-04): more than 25% of "
        "the requests is more than rounding explains"
    )
    out[0][start(6, 0) :] = ref[0][start(6, 0) :]  # two of eight: a quarter is allowed
    v = greedy(ref, out)
    assert v.verified and "2 of 8 requests diverged" in v.detail
    assert v.detail == (
        "tokens equal; 2 of 8 requests diverged at near-ties (gap <= 1e-04): request 0 at token 4 (gap 5.0e-05), "
        "request 3 at token 0 (gap 5.0e-05); each was compared up to there (128 of 160 tokens)"
    )


def test_different_offsets_are_a_mismatch() -> None:
    ref = generated()
    out = opt_of(ref)
    out[3][2] += 1  # request 1 one token longer, request 2 one shorter: the same shapes
    v = greedy(ref, out)
    assert not v.verified and v.outcome == "mismatch"
    assert v.detail == (
        f"request offsets differ: baseline offsets[2] = {int(ref[3][2])}, optimized {int(ref[3][2]) + 1}; both "
        "sides lay out the same requests alike"
    )


def test_an_output_of_another_layout_is_not_verified() -> None:
    ref = generated()
    v = greedy(ref[:3], opt_of(ref[:3]))
    assert not v.verified and v.outcome == "inconclusive"
    assert "needs get_output() to return [tokens (int64), runner_up (int64), gap (float32), offsets (int64)]" in (
        v.detail
    )
    bad = opt_of(ref)
    bad[3][-1] -= 1
    v = greedy(bad, opt_of(bad))
    assert not v.verified and "must rise from 0 to the 160 tokens" in v.detail
    same = [torch.full((160,), 3), *ref[1:]]
    assert "all one token" in greedy(same, opt_of(same)).detail


def test_a_bad_verify_value_is_named_with_what_is_accepted() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_config({"verify": "fuzzy"})
    assert str(err.value) == (
        "invalid benchmark config: verify='fuzzy' is invalid: Input should be 'exact', 'greedy_tokens' or 'quality'"
    )
    assert resolve_config({}).verify == "exact"


# ------------------------------------------------------------------------------ through compare()

GREEDY = {"verify": "greedy_tokens"}


def test_a_pair_is_compared_as_its_config_says_and_both_sides_must_say_the_same(tmp_path: Path) -> None:
    ref = generated()
    ref[2][start(5, 2)] = 2e-6
    out = opt_of(ref)
    part(out, 5, 2)
    c = compare(variant(tmp_path, "baseline", ref, config=GREEDY), variant(tmp_path, "optimized", out, config=GREEDY))
    assert c.status == "ok" and c.verification.verified, c.verification.detail
    assert "1 of 8 requests diverged at a near-tie" in c.verification.detail
    c = compare(variant(tmp_path, "baseline", ref), variant(tmp_path, "optimized", out))  # "exact"
    assert c.status == "mismatch" and "output[0]: relative error" in c.verification.detail
    c = compare(variant(tmp_path, "baseline", ref), variant(tmp_path, "optimized", out, config=GREEDY))
    assert c.status == "mismatch"
    assert c.verification.detail.startswith("the sides are verified differently: baseline verify='exact'")


def test_the_changed_inputs_recheck_goes_through_the_same_comparison(tmp_path: Path) -> None:
    """The outputs on changed inputs: a near-tie there is accepted as on the set-up inputs; a divergence that is
    not one fails the pair as a result that did not follow its inputs."""
    from bench.measure import outputs as saved

    def side(name: str, main: list[torch.Tensor], fresh: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        v = variant(tmp_path, name, main, config=GREEDY)
        path = str(tmp_path / f"{name}-fresh")
        info = OutputInfo(path=path, tensors=saved.save(fresh, path))
        return v.model_copy(update={"recheck": Recheck(perturbed=3, output_changed=True, fresh=info)})

    ref, fresh = generated(), generated(seed=1)
    fresh[2][start(7, 1)] = 1e-6
    near = opt_of(fresh)
    part(near, 7, 1)
    c = compare(side("baseline", ref, fresh), side("optimized", opt_of(ref), near))
    assert c.status == "ok", c.verification.detail
    assert "again on changed inputs (tokens equal; 1 of 8 requests diverged" in c.verification.detail
    cached = opt_of(ref)  # the set-up inputs' answer, given again on the changed ones
    c = compare(side("baseline", ref, fresh), side("optimized", opt_of(ref), cached))
    assert c.status == "mismatch"
    assert c.verification.detail.startswith("outputs match on the set-up inputs but not once the inputs were changed")
