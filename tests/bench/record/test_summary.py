"""bench/record/summary.py: only verified, successful pairs count as speedups; failures are listed."""

from __future__ import annotations

import math

import pytest

from bench.define.result import (
    Comparison,
    ErrorInfo,
    SuiteResult,
    Timing,
    VariantResult,
    VariantSpec,
    Verification,
)
from bench.measure.stats import summarize
from bench.record.summary import summary_dict, summary_markdown


def vr(example: str, variant: str, median: float | None, status: str = "ok", error: str | None = None) -> VariantResult:
    timing = None
    if median is not None:
        timing = Timing(mode="cpu", method="test", samples_ms=[median], stats=summarize([median]))
    return VariantResult(
        spec=VariantSpec(chapter="ch07", example=example, variant=variant, path=f"/x/{variant}_{example}.py"),
        status=status,  # type: ignore[arg-type]
        failed_stage=None if status == "ok" else "measurement",
        timing=timing,
        error=ErrorInfo(kind="exception", message=error) if error else None,
        device="cpu",
    )


def cmp(example: str, speedup: float | None, status: str, verified: bool) -> Comparison:
    return Comparison(
        chapter="ch07",
        example=example,
        variant="optimized",
        baseline_status="ok",
        optimized_status="ok" if status != "failed" else "timeout",
        speedup=speedup,
        status=status,  # type: ignore[arg-type]
        verification=Verification(verified=verified, detail=f"{example}: {status}"),
    )


@pytest.fixture
def suite() -> SuiteResult:
    examples = {"a": (4.0, "ok", True), "b": (9.0, "ok", True), "c": (100.0, "mismatch", False),
                "d": (50.0, "unverified", False), "e": (None, "failed", False)}  # fmt: skip
    variants, comparisons = [], []
    for ex, (speedup, status, verified) in examples.items():
        variants.append(vr(ex, "baseline", 1.0))
        if status == "failed":
            variants.append(vr(ex, "optimized", None, "timeout", "stage 'measurement' exceeded | its limit"))
        else:
            variants.append(vr(ex, "optimized", 1.0 / speedup))  # type: ignore[operator]
        comparisons.append(cmp(ex, speedup, status, verified))
    return SuiteResult(variants=variants, comparisons=comparisons, unpaired=["ch07:solo"], wall_s=3.0)


def test_geomean_counts_verified_ok_pairs_only(suite: SuiteResult) -> None:
    s = summary_dict(suite)
    assert s["geomean_speedup_verified"] == pytest.approx(math.sqrt(4.0 * 9.0))  # not 100× or 50×
    assert (s["n_pairs"], s["n_pairs_verified"]) == (5, 2)
    assert (s["n_variants"], s["n_variants_ok"]) == (10, 9)
    assert s["unpaired_baselines"] == ["ch07:solo"]


def test_no_verified_pair_means_no_geomean(suite: SuiteResult) -> None:
    suite.comparisons = [c for c in suite.comparisons if c.status != "ok"]
    assert summary_dict(suite)["geomean_speedup_verified"] is None


def test_markdown_marks_unverified_speedups_and_lists_failures(suite: SuiteResult) -> None:
    md = summary_markdown(summary_dict(suite))
    row = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ch07:")}
    assert "(not a success)" in row["ch07:c"] and "(not a success)" in row["ch07:d"]
    assert "(not a success)" not in row["ch07:a"]
    assert "## Variants not ok" in md
    failure = next(line for line in md.splitlines() if line.startswith("| ch07:e:optimized"))
    assert "timeout" in failure and "exceeded \\| its limit" in failure  # the table is not broken
    assert "Baselines without an optimized partner: ch07:solo" in md
