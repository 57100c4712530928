"""Chapter 20's fakes (chapters/ch20/fakes/ch91): every fake "optimization" of the matmul ends not ok or not
verified, each with the reason its docstring states, and never counts as a success; the honest ones stay ok
and verified. Run as ``perflab run --chapters-dir chapters/ch20/fakes --targets ch91`` runs them.

On a CPU the side-stream fake (GPU only) ends skipped with its reason; on a GPU it must end invalid.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.define.discovery import discover, select
from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.isolate.suite import run_suite
from bench.record.summary import summary_dict

ROOT = Path(__file__).resolve().parents[2] / "chapters" / "ch20" / "fakes"
CUDA = torch.cuda.is_available()

# variant -> "ok" (ok and verified), or the verdicts it may end with: (status, or None for "ok but not
# verified", and a phrase the reason holds)
EXPECTED: dict[str, object] = {
    "optimized_tuned": "ok",
    "optimized_fp8_declared": "ok",
    "optimized_precomputed": [("invalid", "NaN poison")],
    "optimized_cached": [("invalid", "did not change when")],
    "optimized_mutated": [(None, "not once the inputs were changed")],
    "optimized_fp8": [(None, "exceeds rtol 1.6e-02 (bfloat16)")],
    # on a GPU half the work at cuBLAS speed may also claim more FLOP/s than the measured peak
    "optimized_smaller": [(None, "exceeds rtol"), ("invalid", "faster than the hardware")],
    "optimized_timer": [("invalid", "timer replaced: time.perf_counter")],
    "optimized_sidestream": [("invalid", "unjoined side stream")],
}
GPU_ONLY = {"optimized_sidestream"}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> SuiteResult:
    examples = select(discover(ROOT), ["ch91"])
    return run_suite(examples, cli_layer={"iterations": 5, "timeout_multiplier": 4.0},
                     workdir=tmp_path_factory.mktemp("fakes"))  # fmt: skip


def _pair(suite: SuiteResult, variant: str) -> tuple[VariantResult, Comparison]:
    result = next(v for v in suite.variants if v.spec.variant == variant)
    comparison = next(c for c in suite.comparisons if c.variant == variant)
    return result, comparison


def test_every_variant_on_disk_has_an_expected_verdict(suite: SuiteResult) -> None:
    assert {c.variant for c in suite.comparisons} == set(EXPECTED)
    assert next(v for v in suite.variants if v.spec.variant == "baseline").status == "ok"


def test_the_fakes_are_not_chapter_20s_pairs() -> None:
    """``perflab run --targets ch20`` finds the chapter's pairs only: the fakes live under their own number."""
    assert not [e for e in select(discover(), ["ch20"]) if e.name == "matmul"]
    assert {e.chapter for e in select(discover(ROOT))} == {"ch91"}


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_each_fake_is_caught_and_each_honest_one_stands(suite: SuiteResult, variant: str) -> None:
    result, comparison = _pair(suite, variant)
    why = f"{result.status} {result.error and result.error.message}; pair: {comparison.verification.detail}"
    if variant in GPU_ONLY and not CUDA:
        assert result.status == "skipped" and "CUDA" in (result.skip_reason or ""), result.skip_reason
        return
    expected = EXPECTED[variant]
    if expected == "ok":
        assert result.status == "ok", why
        assert comparison.status == "ok" and comparison.verification.verified, why
        return
    assert not (result.status == "ok" and comparison.verification.verified), f"a fake passed: {why}"
    verdicts = []
    for status, phrase in expected:  # type: ignore[union-attr]
        if status is None:
            verdicts.append(result.status == "ok" and phrase in comparison.verification.detail)
        else:
            verdicts.append(result.status == status and phrase in (result.error.message if result.error else ""))
    assert any(verdicts), why


def test_no_fake_counts_in_the_summary(suite: SuiteResult) -> None:
    summary = summary_dict(suite)
    counted = {p["variant"] for p in summary["pairs"] if p["verified"] and p["status"] == "ok"}
    assert counted == {v for v, e in EXPECTED.items() if e == "ok"}
