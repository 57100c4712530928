"""Regression detection: a variant run against the previous runs of the same benchmark in MLflow.

History = the previous ``k`` runs of the same benchmark (tags ``perflab.chapter/example/variant``)
in the same experiment, with status ``ok``, on the same hardware (tag ``perflab.gpu``, or
``perflab.device`` for CPU runs) and the same software (``perflab.torch`` / ``perflab.triton``
tags, or the ``torch`` / ``triton`` of the ``result.json`` manifest for runs logged before those
tags existed). Their raw samples are pooled.

A regression needs two things at once:

* the median slowdown against the pooled history exceeds ``threshold`` (5 %): a statistically
  real but tiny shift (1 % on a quiet GPU) is not worth a red flag;
* a one-sided Mann–Whitney U test on the raw samples gives ``p < alpha`` (0.01): a large median
  shift from a handful of noisy samples is not evidence.

Pooling treats all history samples as one population; run-to-run variation (clocks, placement)
makes that optimistic, which is one more reason the threshold is also required. ``improved`` is
the mirror image (faster by more than the threshold, and the opposite one-sided test agrees).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scipy.stats import mannwhitneyu

from bench.record import StoredRun, benchmark_runs, child_runs, latest_suite_run_id, read_artifact_text, read_run

__all__ = ["Assessment", "RegressionRow", "assess", "check_run", "check_suite", "regression_table"]

Verdict = Literal["regressed", "ok", "improved", "no-history", "not-measured"]
DEFAULT_K = 5
DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.01


@dataclass(frozen=True)
class Assessment:
    status: Literal["regressed", "ok", "improved"]
    slowdown_pct: float  # 100 * (median / pooled history median - 1); negative = faster
    p_value: float  # one-sided Mann–Whitney U p in the direction the median moved


def _check_params(threshold: float, alpha: float, k: int | None = None) -> None:
    if not (threshold >= 0 and math.isfinite(threshold)):
        raise ValueError(f"threshold is a relative slowdown >= 0 (0.05 = 5 %), but got {threshold=}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha is a significance level in (0, 1), but got {alpha=}")
    if k is not None and k < 1:
        raise ValueError(f"k is the number of previous runs to pool, at least 1, but got {k=}")


def assess(
    samples: Sequence[float],
    history: Sequence[float],
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> Assessment:
    """Compare raw samples (ms) with pooled history samples (ms); see the module docstring."""
    _check_params(threshold, alpha)
    if not samples or not history:
        raise ValueError(f"need samples on both sides, but got {len(samples)} samples and {len(history)} history")
    now, before = statistics.median(samples), statistics.median(history)
    if before <= 0:
        raise ValueError(f"history median must be > 0 ms, but got {before=}")
    slowdown = now / before - 1.0
    alternative = "greater" if slowdown >= 0 else "less"
    p = float(mannwhitneyu(samples, history, alternative=alternative).pvalue)
    if not math.isfinite(p):  # every sample identical on both sides: no evidence of anything
        p = 1.0
    status: Literal["regressed", "ok", "improved"] = "ok"
    if abs(slowdown) > threshold and p < alpha:
        status = "regressed" if slowdown > 0 else "improved"
    return Assessment(status=status, slowdown_pct=100.0 * slowdown, p_value=p)


@dataclass
class RegressionRow:
    key: str  # chapter:example:variant
    run_id: str
    status: Verdict
    reason: str = ""  # why no-history / not-measured, or what the verdict rests on
    slowdown_pct: float | None = None
    p_value: float | None = None
    k_used: int = 0
    median_ms: float | None = None
    history_median_ms: float | None = None
    history_run_ids: list[str] = field(default_factory=list)
    hardware: str = "?"
    software: str = "?"


class _ResultCache:
    """result.json of a run, downloaded once per check (a suite's variants share nothing, but
    the CLI may check a run whose history overlaps another's)."""

    def __init__(self, tracking_uri: str | None) -> None:
        self._uri = tracking_uri
        self._data: dict[str, dict] = {}

    def get(self, run_id: str) -> dict:
        if run_id not in self._data:
            self._data[run_id] = json.loads(read_artifact_text(run_id, "result.json", self._uri))
        return self._data[run_id]


def _hardware(run: StoredRun) -> str:
    return run.tags.get("perflab.gpu") or run.tags.get("perflab.device") or "unknown device"


def _software(run: StoredRun, results: _ResultCache) -> str:
    torch, triton = run.tags.get("perflab.torch"), run.tags.get("perflab.triton")
    if torch is None:  # logged before the version tags existed: the result's manifest has them
        manifest = results.get(run.run_id).get("manifest") or {}
        torch, triton = manifest.get("torch"), manifest.get("triton")
    return f"torch {torch or '?'}" + (f", triton {triton}" if triton else "")


def _samples(run: StoredRun, results: _ResultCache) -> list[float]:
    timing = results.get(run.run_id).get("timing") or {}
    return [float(x) for x in timing.get("samples_ms") or []]


def _others(counter: Counter[str], label: str) -> list[str]:
    return [f"{n} {label} {value}" for value, n in sorted(counter.items())]


def check_run(
    run: StoredRun,
    k: int = DEFAULT_K,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    tracking_uri: str | None = None,
    results: _ResultCache | None = None,
) -> RegressionRow:
    """Check one variant run against its history."""
    _check_params(threshold, alpha, k)
    if not run.is_variant:
        raise ValueError(f"run {run.run_id!r} ({run.name!r}) is not a perflab variant run (no perflab.variant tag)")
    results = results or _ResultCache(tracking_uri)
    t = run.tags
    key = f"{t.get('perflab.chapter')}:{t.get('perflab.example')}:{t.get('perflab.variant')}"
    hardware = _hardware(run)
    row = RegressionRow(key=key, run_id=run.run_id, status="not-measured", hardware=hardware)
    if t.get("perflab.status") != "ok":
        row.reason = f"this run's status is {t.get('perflab.status')!r}, not 'ok'"
        return row
    row.software = software = _software(run, results)
    samples = _samples(run, results)
    if not samples:
        row.reason = "this run's result.json has no timing samples"
        return row
    row.median_ms = statistics.median(samples)

    earlier = [
        r
        for r in benchmark_runs(
            run.experiment_id, t["perflab.chapter"], t["perflab.example"], t["perflab.variant"], tracking_uri
        )
        if r.run_id != run.run_id and r.start_time <= run.start_time
    ]
    not_ok: Counter[str] = Counter()
    other_hw: Counter[str] = Counter()
    other_sw: Counter[str] = Counter()
    used: list[StoredRun] = []
    for r in earlier:  # newest first
        if r.tags.get("perflab.status") != "ok":
            not_ok[r.tags.get("perflab.status", "?")] += 1
        elif _hardware(r) != hardware:
            other_hw[_hardware(r)] += 1
        elif (sw := _software(r, results)) != software:
            other_sw[sw] += 1
        elif _samples(r, results):
            used.append(r)
            if len(used) == k:
                break
    if not used:
        row.status = "no-history"
        seen = _others(other_hw, "on") + _others(other_sw, "with") + _others(not_ok, "with status")
        row.reason = f"no previous ok run of {key} on {hardware} with {software}" + (
            f" (earlier runs: {'; '.join(seen)})" if seen else ""
        )
        return row
    history = [x for r in used for x in _samples(r, results)]
    verdict = assess(samples, history, threshold, alpha)
    row.status, row.slowdown_pct, row.p_value = verdict.status, verdict.slowdown_pct, verdict.p_value
    row.k_used = len(used)
    row.history_median_ms = statistics.median(history)
    row.history_run_ids = [r.run_id for r in used]
    row.reason = (
        f"median {verdict.slowdown_pct:+.1f} % vs {len(used)} previous run(s), "
        f"one-sided Mann–Whitney p={verdict.p_value:.2g} (flag: > {100 * threshold:g} % and p < {alpha:g})"
    )
    return row


def check_suite(
    run_id: str | None = None,
    k: int = DEFAULT_K,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    tracking_uri: str | None = None,
    on_row: Callable[[RegressionRow], None] | None = None,
) -> tuple[str, list[RegressionRow]]:
    """Check a variant run, or every variant run of a suite (default: the latest completed one).

    Returns ``(run id checked, rows)``; ``LookupError`` for an unknown run id.
    """
    _check_params(threshold, alpha, k)
    if run_id is None:
        run_id = latest_suite_run_id(tracking_uri)
    run = read_run(run_id, tracking_uri)
    runs = [run] if run.is_variant else child_runs(run_id, tracking_uri)
    if not runs:
        raise LookupError(f"run {run_id!r} ({run.name!r}) is neither a variant run nor a suite with variant runs")
    results = _ResultCache(tracking_uri)
    rows = []
    for r in runs:
        if not r.is_variant:
            continue
        row = check_run(r, k, threshold, alpha, tracking_uri, results)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return run_id, rows


def regression_table(rows: list[RegressionRow]) -> Any:
    """A rich table, one row per variant, regressions in red."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="regressions vs previous runs (same benchmark, hardware and software)")
    for col in ("variant", "status", "slowdown", "p", "K", "median ms", "history ms", "why / compared on"):
        table.add_column(col, justify="right" if col in ("slowdown", "p", "K", "median ms", "history ms") else "left")
    colour = {"regressed": "red", "improved": "green", "ok": "default", "no-history": "yellow"}
    for r in rows:
        unchecked = r.status in ("no-history", "not-measured")
        table.add_row(
            escape(r.key),
            f"[{colour.get(r.status, 'magenta')}]{r.status}[/]",
            "—" if r.slowdown_pct is None else f"{r.slowdown_pct:+.1f}%",
            "—" if r.p_value is None else f"{r.p_value:.2g}",
            str(r.k_used),
            "—" if r.median_ms is None else f"{r.median_ms:.4f}",
            "—" if r.history_median_ms is None else f"{r.history_median_ms:.4f}",
            escape(r.reason if unchecked else f"{r.hardware}, {r.software}"),
        )
    return table
