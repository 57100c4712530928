"""Run a list of examples: each variant isolated, each optimized variant compared with its baseline.

Nothing is lost: a failing, hanging or crashing variant is recorded with its status and stage and the
suite runs on. Results are handed to the tracker as they finish, so an interrupted suite keeps what ran.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from bench.compare import compare
from bench.config import Layer
from bench.discovery import Example
from bench.result import Comparison, SuiteResult, VariantResult
from bench.runner import run_variant


class Sink(Protocol):
    """Where finished results go (the MLflow tracker, a test's list)."""

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str: ...


OnResult = Callable[[VariantResult, Comparison | None], None]


def run_suite(
    examples: Sequence[Example],
    suite_layer: Layer = None,
    cli_layer: Layer = None,
    sink: Sink | None = None,
    on_result: OnResult | None = None,
    workdir: str | Path | None = None,
    keep_workdir: bool = False,
    cold_start: bool = False,
) -> SuiteResult:
    """Run every variant of ``examples`` in order, baseline first; compare each optimized with it."""
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="perflab-"))
    t0 = time.monotonic()
    variants: list[VariantResult] = []
    comparisons: list[Comparison] = []
    unpaired: list[str] = []
    try:
        for example in examples:
            if not example.optimized:
                unpaired.append(example.target)
            baseline = None
            for spec in example.variants:
                wd = root / spec.chapter / spec.example / spec.variant
                result = run_variant(spec, wd, suite_layer=suite_layer, cli_layer=cli_layer, cold_start=cold_start)
                comparison = None
                if spec.is_baseline:
                    baseline = result
                elif baseline is not None:
                    comparison = compare(baseline, result)
                    comparisons.append(comparison)
                variants.append(result)
                if sink is not None:
                    sink.log_variant(result, comparison)
                if on_result is not None:
                    on_result(result, comparison)
    finally:
        if not keep_workdir:
            shutil.rmtree(root, ignore_errors=True)
    return SuiteResult(variants=variants, comparisons=comparisons, unpaired=unpaired, wall_s=time.monotonic() - t0)
