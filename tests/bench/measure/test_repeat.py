"""bench/measure/repeat.py: whether one variant's output repeats on the same inputs, weighed as a pair's outputs are
(an atomic's last-bit noise is no difference); bench/measure/compare.py names a side whose output did not in its
pair's mismatch, and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.define.config import BenchmarkConfig
from bench.define.result import VariantResult
from bench.measure.compare import compare
from bench.measure.repeat import REPEAT_MAX_MS, looked, repeats
from tests.bench.measure.test_compare import perturbed, ref, variant

WHY = "differs between two calls on the same inputs"


def test_the_same_output_repeats() -> None:
    r = ref()
    assert repeats([r], [r.clone()], None) == (True, 0.0)


def test_last_bit_noise_within_rtol_repeats() -> None:
    r = ref()
    again, diff = repeats([r], [perturbed(r, 1e-7)], None)
    assert again is True and diff is not None and 0.0 < diff < 1e-5


def test_new_random_numbers_do_not_repeat() -> None:
    r = ref()
    again, diff = repeats([r], [r + 0.5 * ref(seed=1)], None)
    assert again is False and diff is not None and diff > 0.1


def test_a_count_in_an_integer_output_does_not_repeat() -> None:
    x = torch.arange(1, 100)
    assert repeats([x * 3], [x * 4], None) == (False, 99.0)


def test_nan_at_the_same_places_is_no_difference() -> None:
    r = ref()
    r[7] = float("nan")
    again = r.clone()
    again[3] += 1e-7 * abs(float(again[3]))  # and noise elsewhere: weighed as noise
    assert repeats([r], [again], None)[0] is True
    lone = r.clone()
    lone[7] = 1.0
    assert repeats([r], [lone], None)[0] is False


def test_another_shape_does_not_repeat() -> None:
    r = ref()
    assert repeats([r], [r[:10]], None) == (False, None)


def test_a_constant_output_cannot_be_weighed() -> None:
    assert repeats([torch.ones(10)], [torch.full((10,), 2.0)], None) == (None, 1.0)


def test_looked_at_only_where_a_second_call_is_cheap_and_means_something() -> None:
    c = BenchmarkConfig()
    assert looked(c, 1.0, False, None)
    assert not looked(c, 1.0, True, None)  # the timed calls changed a set-up tensor
    assert not looked(c, REPEAT_MAX_MS, False, None)  # a slow call
    assert not looked(c, 1.0, False, object())  # a token generation
    assert not looked(c.model_copy(update={"world_size": 2}), 1.0, False, None)
    assert not looked(c.model_copy(update={"check_inputs": False}), 1.0, False, None)  # set-up tensors unwatched
    assert not looked(c.model_copy(update={"verify": "quality"}), 1.0, False, None)


def _with_repeat(result: VariantResult, repeated: bool | None, diff: float | None = None) -> VariantResult:
    assert result.output is not None
    result.output.repeated, result.output.repeat_max_abs_diff = repeated, diff
    return result


@pytest.mark.parametrize("side", ["baseline", "optimized"])
def test_a_mismatch_names_the_side_whose_output_did_not_repeat(tmp_path: Path, side: str) -> None:
    r = ref()
    sides = {name: variant(tmp_path, name, [r if name == "baseline" else r * 2]) for name in ("baseline", "optimized")}
    for name, result in sides.items():
        _with_repeat(result, name != side, 1.25 if name == side else 0.0)
    c = compare(sides["baseline"], sides["optimized"])
    assert c.status == "mismatch"
    detail = c.verification.detail
    assert detail.startswith("output[0]: relative error"), detail
    assert f"; the {side} side's output {WHY} (max abs diff 1.25): its call" in detail, detail


def test_both_sides_named_where_neither_repeats(tmp_path: Path) -> None:
    r = ref()
    b = _with_repeat(variant(tmp_path, "baseline", [r]), False, 0.5)
    o = _with_repeat(variant(tmp_path, "optimized", [r * 2]), False, None)  # a NaN on one side only: no number
    c = compare(b, o)
    assert c.status == "mismatch", c.verification
    assert "; both sides' outputs differ between two calls on the same inputs: their calls" in c.verification.detail


@pytest.mark.parametrize("repeated", [True, None])
def test_a_side_that_repeated_or_was_not_looked_at_is_not_named(tmp_path: Path, repeated: bool | None) -> None:
    r = ref()
    c = compare(_with_repeat(variant(tmp_path, "baseline", [r]), repeated),
                _with_repeat(variant(tmp_path, "optimized", [r * 2]), repeated))  # fmt: skip
    assert c.status == "mismatch" and WHY not in c.verification.detail


def test_a_verified_pair_keeps_its_text_whatever_its_repeat(tmp_path: Path) -> None:
    r = ref()
    plain = compare(variant(tmp_path, "baseline", [r]), variant(tmp_path, "optimized", [r.clone()]))
    c = compare(_with_repeat(variant(tmp_path, "baseline", [r]), False, 0.1),
                _with_repeat(variant(tmp_path, "optimized", [r.clone()]), False, 0.1))  # fmt: skip
    assert c.status == "ok" and c.verification == plain.verification
