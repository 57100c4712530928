"""bench/measure/compare.py + verify.py: outputs are verified by relative error per dtype, never by default;
speedups are raw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench.define.result import ErrorInfo, OutputInfo, Timing, VariantResult, VariantSpec
from bench.measure.compare import compare
from bench.measure.stats import summarize
from bench.measure.verify import DEFAULT_RTOL, compare_tensors, default_rtol


def ref(n: int = 1000, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)).to(dtype)


def perturbed(t: torch.Tensor, rel: float) -> torch.Tensor:
    """``t`` plus noise whose norm is ``rel`` times the norm of ``t``."""
    noise = torch.randn(t.shape, generator=torch.Generator().manual_seed(99), dtype=torch.float64)
    t64 = t.to(torch.float64)
    noise *= rel * torch.linalg.vector_norm(t64) / torch.linalg.vector_norm(noise)
    return (t64 + noise).to(t.dtype)


def variant(
    tmp_path: Path,
    name: str,
    outputs: list[torch.Tensor] | None,
    median_ms: float = 1.0,
    status: str = "ok",
    device: str = "cpu",
    config: dict[str, Any] | None = None,
) -> VariantResult:
    """A VariantResult as the runner builds it, its outputs saved as the child saves them."""
    path, infos = None, []
    if outputs is not None:
        from bench.measure import outputs as saved

        path = tmp_path / f"{name}-outputs"
        infos = saved.save(outputs, str(path))
    samples = [median_ms * f for f in (0.9, 1.0, 1.1)]
    timing = Timing(mode="cpu", method="test", samples_ms=samples, stats=summarize(samples)) if status == "ok" else None
    return VariantResult(
        spec=VariantSpec(chapter="ch07", example="x", variant=name, path=f"/nowhere/{name}_x.py"),
        status=status,  # type: ignore[arg-type]
        error=None if status == "ok" else ErrorInfo(kind="exception", message="RuntimeError: boom"),
        device=device,
        timing=timing,
        output=None if path is None else OutputInfo(path=str(path), tensors=infos),
        config=config or {},
    )


# ------------------------------------------------------------------------------ compare_tensors


def test_equal_outputs_verified() -> None:
    r = ref()
    v = compare_tensors([r], [r.clone()], None)
    assert v.verified and v.outcome == "match"
    assert v.max_rel_error == 0.0 and v.rtol == DEFAULT_RTOL["float32"]


def test_summation_order_noise_within_fp32_tolerance() -> None:
    r = ref()
    v = compare_tensors([r], [perturbed(r, 1e-6)], None)
    assert v.verified and v.max_rel_error == pytest.approx(1e-6, rel=0.1)


def test_relative_error_above_rtol_is_mismatch() -> None:
    r = ref()
    v = compare_tensors([r], [perturbed(r, 1e-3)], None)
    assert not v.verified and v.outcome == "mismatch"
    assert v.max_rel_error == pytest.approx(1e-3, rel=0.1)
    assert "relative error" in v.detail and "float32" in v.detail


def test_error_is_relative_not_absolute() -> None:
    # Same relative error at a tiny and a huge scale: the verdict must not depend on magnitude.
    r = ref()
    for scale in (1e-8, 1e8):
        assert compare_tensors([r * scale], [perturbed(r * scale, 1e-6)], None).verified
        assert not compare_tensors([r * scale], [perturbed(r * scale, 1e-3)], None).verified


def test_bf16_tolerance_looser_than_fp32() -> None:
    assert default_rtol("bfloat16") > default_rtol("float16") > default_rtol("float32") > default_rtol("float64")
    r32 = ref()
    r16 = ref(dtype=torch.bfloat16)
    assert not compare_tensors([r32], [perturbed(r32, 5e-3)], None).verified
    v = compare_tensors([r16], [perturbed(r16, 5e-3)], None)
    assert v.verified and v.rtol == DEFAULT_RTOL["bfloat16"]


def test_explicit_rtol_overrides_dtype_default() -> None:
    r = ref()
    out = perturbed(r, 1e-2)
    assert not compare_tensors([r], [out], None).verified
    v = compare_tensors([r], [out], 5e-2)
    assert v.verified and v.rtol == 5e-2


def test_integer_outputs_must_be_exact() -> None:
    r = torch.arange(100)
    assert default_rtol("int64") == 0.0
    assert compare_tensors([r], [r.clone()], None).verified
    off_by_one = r.clone()
    off_by_one[17] += 1
    assert compare_tensors([r], [off_by_one], None).outcome == "mismatch"


def test_dtype_drift_is_mismatch() -> None:
    r = ref()
    v = compare_tensors([r], [r.to(torch.bfloat16)], None)
    assert not v.verified and v.outcome == "mismatch"
    assert "dtype" in v.detail and "bfloat16" in v.detail


def test_shape_mismatch() -> None:
    r = ref(1000)
    v = compare_tensors([r], [r.reshape(10, 100)], None)
    assert v.outcome == "mismatch" and v.detail == "output[0]: shape, baseline (1000,) vs optimized (10, 100)"


def test_output_count_mismatch() -> None:
    r = ref()
    assert compare_tensors([r, r], [r], None).outcome == "mismatch"


@pytest.mark.parametrize("side", ["baseline", "optimized"])
@pytest.mark.parametrize(("bad", "word"), [(float("nan"), "NaN in the {side}'s output"),
                                           (float("inf"), "±Inf at different places")])  # fmt: skip
def test_a_nan_or_a_lone_inf_is_mismatch(side: str, bad: float, word: str) -> None:
    r = ref()
    broken = r.clone()
    broken[3] = bad
    refs, outs = ([broken], [r]) if side == "baseline" else ([r], [broken])
    v = compare_tensors(refs, outs, None)
    assert not v.verified and v.outcome == "mismatch" and word.format(side=side) in v.detail
    assert "flat index 3" in v.detail


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_masked_scores_verify_where_their_infinities_agree(dtype: torch.dtype) -> None:
    """Causal attention scores (-inf above the diagonal), as two correct implementations return them: the
    infinities stand at the same places, the finite entries are compared norm-wise."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 16, 8, generator=g), torch.randn(2, 16, 8, generator=g)
    mask = torch.ones(16, 16, dtype=torch.bool).triu(1)
    r = (q @ k.transpose(-1, -2)).masked_fill(mask, float("-inf")).to(dtype)
    o = torch.baddbmm(torch.zeros(16, 16).masked_fill(mask, float("-inf")).expand(2, -1, -1), q,
                      k.transpose(-1, -2)).to(dtype)  # fmt: skip
    assert compare_tensors([r], [o], None).verified
    wrong = o.clone()
    wrong[0, 5, 2] += 50.0  # a finite entry off (the finite entries' norm is ~47): still found
    assert compare_tensors([r], [wrong], None).outcome == "mismatch"
    flipped = o.clone()
    flipped[0, 0, 15] = float("inf")  # +Inf where the reference has -Inf
    v = compare_tensors([r], [flipped], None)
    assert v.outcome == "mismatch" and "±Inf at different places or signs (1 of 512" in v.detail
    shifted = o.clone()
    shifted[1, 4, 3] = float("-inf")  # one more masked entry than the reference
    assert compare_tensors([r], [shifted], None).outcome == "mismatch"


def test_an_output_of_infinities_only_proves_nothing() -> None:
    r = torch.full((8,), float("-inf"))
    v = compare_tensors([r], [r.clone()], None)
    assert not v.verified and v.outcome == "inconclusive" and "every entry is ±Inf" in v.detail


@pytest.mark.parametrize(("reference", "word"), [(torch.zeros(64), "zeros"), (torch.full((64,), 3.0), "constant")])
def test_degenerate_reference_is_inconclusive(reference: torch.Tensor, word: str) -> None:
    v = compare_tensors([reference], [reference.clone()], None)
    assert not v.verified and v.outcome == "inconclusive" and word in v.detail


def test_empty_output_is_inconclusive() -> None:
    v = compare_tensors([torch.empty(0)], [torch.empty(0)], None)
    assert not v.verified and v.outcome == "inconclusive"


def test_second_output_checked_too() -> None:
    a, b = ref(seed=1), ref(seed=2)
    v = compare_tensors([a, b], [a.clone(), perturbed(b, 1e-2)], None)
    assert v.outcome == "mismatch" and "output[1]" in v.detail


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rel", [3e-6, 1e-3, 0.3])
def test_fp32_fast_path_error_matches_float64(dtype: torch.dtype, rel: float) -> None:
    """The aminmax + fp32 path reports the same relative error as a float64 computation."""
    from bench.measure.verify import _fast_error

    r = ref(4096, dtype)
    o = perturbed(r, rel)
    fast = _fast_error(r, o, "output[0]", 1.0)
    r64, o64 = r.double(), o.double()
    exact = float(torch.linalg.vector_norm(o64 - r64) / torch.linalg.vector_norm(r64))
    assert isinstance(fast, float) and fast == pytest.approx(exact, rel=1e-5)


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_huge_or_tiny_magnitudes_still_verified(scale: float) -> None:
    """fp32 squares of 1e30 overflow and of 1e-30 underflow: such outputs take the float64 path."""
    r = ref() * scale
    assert compare_tensors([r], [r.clone()], None).verified
    v = compare_tensors([r], [perturbed(r, 1e-2)], None)
    assert v.outcome == "mismatch" and v.max_rel_error == pytest.approx(1e-2, rel=1e-3)


@pytest.mark.parametrize("where", [0, 999])
def test_nan_found_anywhere_by_the_fast_path(where: int) -> None:
    r = ref()
    broken = r.clone()
    broken[where] = float("nan")
    assert compare_tensors([r], [broken], None).outcome == "mismatch"
    assert compare_tensors([broken], [r], None).outcome == "mismatch"


def test_constant_reference_found_by_the_fast_path() -> None:
    r = torch.full((1000,), 2.5)
    o = r.clone()
    o[7] = 2.6  # a different optimized output does not make the reference informative
    assert compare_tensors([r], [o], None).outcome == "inconclusive"


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_outputs_are_compared(dtype: torch.dtype) -> None:
    """FP8 codes (a quantiser's output) take the float64 path: equal codes verify, a changed code, a NaN or
    a wrong scale do not."""
    r = (ref(4096) * 30).to(dtype)
    assert compare_tensors([r], [r.clone()], 1e-3).verified
    off = r.clone()
    off[::64] = (off[::64].float() * 1.5).to(dtype)  # 1 in 64 codes half as large again
    v = compare_tensors([r], [off], 1e-3)
    assert v.outcome == "mismatch" and "exceeds rtol" in v.detail
    nan = r.clone()
    nan[5] = float("nan")
    assert compare_tensors([r], [nan], 1e-3).outcome == "mismatch"


# ------------------------------------------------------------------------------------ compare


def test_compare_ok_pair(tmp_path: Path) -> None:
    r = ref()
    c = compare(variant(tmp_path, "baseline", [r], 2.0), variant(tmp_path, "optimized", [r.clone()], 0.5))
    assert c.status == "ok" and c.verification.verified
    assert c.speedup == pytest.approx(4.0)
    assert (c.baseline_median_ms, c.optimized_median_ms) == (pytest.approx(2.0), pytest.approx(0.5))
    assert (c.baseline_value, c.optimized_value) == (c.baseline_median_ms, c.optimized_median_ms)  # on the call
    assert (c.chapter, c.example, c.variant) == ("ch07", "x", "optimized")


def test_a_batch_speedup_divides_the_batch_medians_and_keeps_the_call_medians(tmp_path: Path) -> None:
    """speedup_time="batch": the speedup and its two values are the batch times; each side's median call time
    (cold) stays what the tables show in its own column."""
    from bench.define.timing import BatchTiming

    r = ref()
    sides = []
    for name, cold, batch in (("baseline", 2.0, 1.0), ("optimized", 1.5, 0.25)):
        v = variant(tmp_path, name, [r.clone()], cold, config={"speedup_time": "batch"})
        samples = [batch * f for f in (0.9, 1.0, 1.1)]
        sides.append(v.model_copy(update={"batch": BatchTiming(samples_ms=samples, stats=summarize(samples),
                                                                calls=10, method="t")}))  # fmt: skip
    c = compare(*sides)
    assert c.speedup_time == "batch" and c.speedup == pytest.approx(4.0)
    assert (c.baseline_value, c.optimized_value) == (pytest.approx(1.0), pytest.approx(0.25))
    assert (c.baseline_median_ms, c.optimized_median_ms) == (pytest.approx(2.0), pytest.approx(1.5))


def test_slower_optimized_speedup_below_one_not_clamped(tmp_path: Path) -> None:
    r = ref()
    c = compare(variant(tmp_path, "baseline", [r], 1.0), variant(tmp_path, "optimized", [r.clone()], 4.0))
    assert c.status == "ok"
    assert c.speedup == pytest.approx(0.25)


def test_compare_mismatch_keeps_speedup_but_not_verified(tmp_path: Path) -> None:
    r = ref()
    c = compare(variant(tmp_path, "baseline", [r], 2.0), variant(tmp_path, "optimized", [r * 1.01], 1.0))
    assert c.status == "mismatch" and not c.verification.verified
    assert c.speedup == pytest.approx(2.0)


def test_rtol_from_optimized_config(tmp_path: Path) -> None:
    r = ref()
    c = compare(
        variant(tmp_path, "baseline", [r]),
        variant(tmp_path, "optimized", [perturbed(r, 1e-2)], config={"rtol": 5e-2}),
    )
    assert c.status == "ok" and c.verification.rtol == 5e-2


@pytest.mark.parametrize("missing", ["baseline", "optimized", "both"])
def test_missing_output_is_unverified(tmp_path: Path, missing: str) -> None:
    r = ref()
    base = variant(tmp_path, "baseline", None if missing in ("baseline", "both") else [r])
    opt = variant(tmp_path, "optimized", None if missing in ("optimized", "both") else [r])
    c = compare(base, opt)
    assert c.status == "unverified" and not c.verification.verified
    assert "no output" in c.verification.detail


def test_zero_reference_pair_is_unverified(tmp_path: Path) -> None:
    z = torch.zeros(64)
    c = compare(variant(tmp_path, "baseline", [z]), variant(tmp_path, "optimized", [z.clone()]))
    assert c.status == "unverified" and not c.verification.verified


def test_different_devices_not_compared(tmp_path: Path) -> None:
    r = ref()
    c = compare(variant(tmp_path, "baseline", [r]), variant(tmp_path, "optimized", [r], device="cuda:0"))
    assert c.status == "unverified" and "different devices" in c.verification.detail
    assert c.speedup is None  # never a speedup across devices or GPU models


def _on_gpu(result: VariantResult, visible: str, uuid: str | None, name: str = "NVIDIA H200") -> VariantResult:
    return result.model_copy(
        update={"cuda_visible_devices": visible, "manifest": {"gpu": {"name": name, "uuid": uuid}}}
    )


def test_a_pair_on_two_gpu_models_gets_no_speedup(tmp_path: Path) -> None:
    r = ref()
    base, opt = variant(tmp_path, "baseline", [r], median_ms=2.0), variant(tmp_path, "optimized", [r])
    same = compare(_on_gpu(base, "0", "GPU-aaaa"), _on_gpu(opt, "0", "GPU-aaaa"))
    assert same.verification.verified and same.speedup == pytest.approx(2.0)
    models = compare(_on_gpu(base, "0", "GPU-aaaa"), _on_gpu(opt, "1", "GPU-bbbb", name="NVIDIA H100"))
    assert models.speedup is None and "different devices" in models.verification.detail  # never across models


@pytest.mark.parametrize("bad_side", ["baseline", "optimized"])
@pytest.mark.parametrize("bad_status", ["failed", "timeout", "invalid"])
def test_failed_side_fails_the_pair(tmp_path: Path, bad_side: str, bad_status: str) -> None:
    r = ref()
    base = variant(tmp_path, "baseline", [r], status=bad_status if bad_side == "baseline" else "ok")
    opt = variant(tmp_path, "optimized", [r], status=bad_status if bad_side == "optimized" else "ok")
    c = compare(base, opt)
    assert c.status == "failed" and c.speedup is None and not c.verification.verified
    assert c.verification.detail.startswith(f"{bad_side} {bad_status}")


def test_a_precision_pair_declares_its_dtype_and_still_the_same_work(tmp_path: Path) -> None:
    """Declared work must agree (INTEGRITY #4) in bytes and FLOPs; the precision it runs at may differ."""
    from bench.define.result import Work

    r = ref()
    base = variant(tmp_path, "baseline", [r], 2.0).model_copy(update={"work": Work(flops=1e9, dtype="fp32")})
    opt = variant(tmp_path, "optimized", [r.clone()], 1.0).model_copy(update={"work": Work(flops=1e9, dtype="bf16")})
    assert compare(base, opt).status == "ok"
    fewer = opt.model_copy(update={"work": Work(flops=5e8, dtype="bf16")})
    c = compare(base, fewer)
    assert not c.verification.verified and "declared work differs" in c.verification.detail


def test_a_stated_ceiling_may_differ_between_the_sides(tmp_path: Path) -> None:
    """Each side states its ceiling from rates it measured itself (a PCIe copy timed in setup): a different
    ceiling_ms is no different work; different bytes still are."""
    from bench.define.result import Work

    r = ref()

    def stated(ms: float, bytes_: float = 1e9) -> Work:
        return Work(bytes=bytes_, ceiling="copies at the measured PCIe rate", ceiling_ms=ms, ceiling_target_pct=80.0)

    base = variant(tmp_path, "baseline", [r], 2.0).model_copy(update={"work": stated(0.98)})
    opt = variant(tmp_path, "optimized", [r.clone()], 1.0).model_copy(update={"work": stated(1.02)})
    assert compare(base, opt).status == "ok" and compare(base, opt).verification.verified
    fewer = opt.model_copy(update={"work": stated(1.02, 5e8)})
    assert "declared work differs" in compare(base, fewer).verification.detail


# ------------------------------------------------------------------------------------ the verdict's noise threshold


def in_rounds(tmp_path: Path, name: str, medians: list[float], config: dict[str, Any] | None = None) -> VariantResult:
    """A side measured in rounds (bench.isolate.rounds.merge's shape): round r's samples around ``medians[r]``."""
    v = variant(tmp_path, name, [torch.ones(4)], config=config)
    samples = [m * f for m in medians for f in (0.999, 1.0, 1.001)]
    v.timing = Timing(mode="cpu", method="t", samples_ms=samples, stats=summarize(samples), rounds=[3] * len(medians))
    return v


@pytest.mark.parametrize(
    ("low", "high", "threshold", "verdict"),
    [
        (0.9997, 0.9998, 0.01, "no significant difference"),  # the H200's A/A pair: significant, but within ±1 %
        (0.9997, 0.9998, 0.0, "slower"),  # the plain rule
        (1.03, 1.07, 0.01, "faster"),
        (1.005, 1.02, 0.01, "no significant difference"),  # across the band's edge: not beyond it
        (0.985, 0.9899, 0.01, "slower"),  # below 1 / 1.01 = 0.990099: the band symmetric in log space
        (0.985, 0.9902, 0.01, "no significant difference"),
        (0.95, 1.05, 0.0, "no significant difference"),
        (None, 1.05, 0.01, None),
    ],
)
def test_a_verdict_needs_its_interval_beyond_the_noise_threshold(low, high, threshold, verdict) -> None:
    from bench.measure.stats import significance

    assert significance(low, high, threshold) == verdict


def test_a_tiny_significant_difference_reads_no_difference_unless_the_threshold_is_0(tmp_path: Path) -> None:
    """Two processes of the same code (an A/A pair) whose rounds agree on a 0.02 % difference: with the default
    threshold (±1 %) no verdict, the threshold on the comparison; with noise_threshold=0, the plain rule's "slower"."""
    base = in_rounds(tmp_path, "baseline", [1.0, 1.0, 1.0, 1.0])
    opt_medians = [1.0002, 1.00025, 1.0002, 1.00025]
    c = compare(base, in_rounds(tmp_path, "optimized", opt_medians))
    assert c.speedup_ci_high < 1.0 and c.speedup_ci_low > 0.999, (c.speedup_ci_low, c.speedup_ci_high)
    assert c.significance == "no significant difference" and c.noise_threshold == 0.01
    plain = compare(base, in_rounds(tmp_path, "optimized", opt_medians, {"noise_threshold": 0.0}))
    assert plain.significance == "slower" and plain.noise_threshold == 0.0
    # A real 5 %: its interval, [1.03, 1.07] or so, lies beyond the band; "faster" as before.
    real = compare(base, in_rounds(tmp_path, "optimized", [1 / 1.03, 1 / 1.07, 1 / 1.05, 1 / 1.05]))
    assert 1.01 < real.speedup_ci_low < 1.05 < real.speedup_ci_high < 1.1 and real.significance == "faster"


def test_a_pair_in_rounds_takes_its_interval_from_them_without_a_bootstrap(tmp_path: Path, monkeypatch) -> None:
    """The rounds give a time's interval; the bootstrap over every sample pooled, which their interval replaces,
    does not run (4.4 s a pair of a trivial op's thousands of samples on the 2-core host). One child a side: it does."""
    import bench.measure.compare as compare_module

    calls = []
    real = compare_module.speedup_interval
    monkeypatch.setattr(compare_module, "speedup_interval", lambda *a, **k: calls.append(a) or real(*a, **k))
    c = compare(in_rounds(tmp_path, "baseline", [1.0, 1.02, 0.99]), in_rounds(tmp_path, "optimized", [0.5, 0.5, 0.51]))
    assert calls == [] and len(c.round_speedups) == 3 and c.speedup_ci_low is not None
    assert c.speedup_ci_low < c.speedup < c.speedup_ci_high and c.significance == "faster"
    one = compare(variant(tmp_path, "baseline", [torch.ones(4)], 2.0), variant(tmp_path, "optimized", [torch.ones(4)]))
    assert len(calls) == 1 and one.speedup_ci_low is not None
