"""Regression detection: a variant run against the previous runs of the same benchmark in MLflow.

History = the previous ``k`` runs of the same benchmark (tags ``perflab.chapter/example/variant``),
in any experiment of the store, with status ``ok``, on the same hardware (tag ``perflab.gpu``, or
``perflab.device`` for CPU runs; for a run timed on the host's clock also the host's CPU, ``perflab.cpu``:
``machine``) and the same software (``perflab.torch`` / ``perflab.triton``
tags, or the ``torch`` / ``triton`` of the ``result.json`` manifest for runs logged before those
tags existed). A run is judged on what its pair's speedup is on: the call time, or a token-generating variant's
metric (TTFT, TPOT, ITL, a percentile of one, tokens/s as milliseconds per token; ``_samples``), against earlier runs
judged on the same; on the call time, a serving step's TTFT doubled would hide in the whole generation's time.

The unit of evidence is a run, not a sample. Thousands of samples of one process say how precisely
that process's median is known, not how much the median moves from one run to the next (clocks, memory
placement, what else the host is doing): on a busy CPU, two runs of the same code differ by 10-40 %
while each run's samples are tight, and pooling them called such noise a regression at p = 1e-80.
So each run gives one number, its median, and a new median is judged against the spread of the previous
runs' medians:

* the slowdown is the new median against the median of the previous runs' medians;
* the test is a one-sided prediction-interval t test on log medians: ``t = (log m - mean) / (s *
  sqrt(1 + 1/k))`` with ``k - 1`` degrees of freedom, ``s`` the standard deviation of the previous log
  medians (never below the new run's own standard error of its median); it needs at least two previous
  runs (one shows no spread).

A regression needs both: the slowdown exceeds ``threshold`` (5 %: a statistically real but tiny shift
is not worth a red flag) and ``p < alpha`` (0.01). ``improved`` is the mirror image. A change beyond the
threshold that the spread between runs does not support (two or three runs of history, or a noisy one) is
``not-significant``, not ``ok``: it is neither flagged nor shown as nothing; ``ok`` is a change within the threshold.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.stats import t as student_t

from bench.record import StoredRun, benchmark_runs, campaign_of, latest_suite_run_id, read_artifact_text, read_run

__all__ = [
    "Assessment", "RegressionRow", "assess", "check_run", "check_suite", "machine", "regression_notes",
    "regression_table",
]  # fmt: skip

Status = Literal["regressed", "ok", "improved", "not-significant"]
Verdict = Literal["regressed", "ok", "improved", "not-significant", "no-history", "not-measured"]
DEFAULT_K = 5
MIN_RUNS = 2  # previous runs a verdict needs: one run shows no spread between runs
DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.01


@dataclass(frozen=True)
class Assessment:
    status: Status
    slowdown_pct: float  # 100 * (median / median of the previous runs' medians - 1); negative = faster
    p_value: float  # one-sided, in the direction the median moved, from the spread between runs
    spread_pct: float  # the spread between runs the test used: 100 * s (s of the log medians)


def _check_params(threshold: float, alpha: float, k: int | None = None) -> None:
    if not (threshold >= 0 and math.isfinite(threshold)):
        raise ValueError(f"threshold is a relative slowdown >= 0 (0.05 = 5 %), but got {threshold=}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha is a significance level in (0, 1), but got {alpha=}")
    if k is not None and k < MIN_RUNS:
        raise ValueError(f"k is the number of previous runs to compare with, at least {MIN_RUNS}, but got {k=}")


def _median_noise(samples: Sequence[float]) -> float:
    """The standard error of a run's median, relative (on the log scale): 1.2533 sd / sqrt(n)."""
    logs = [math.log(x) for x in samples if x > 0]
    return 1.2533 * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else 0.0


def assess(
    samples: Sequence[float],
    history: Sequence[Sequence[float]],
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> Assessment:
    """A run's raw samples (ms) against the samples of each previous run (one list per run); see the module
    docstring. ``ValueError`` with fewer than ``MIN_RUNS`` previous runs."""
    _check_params(threshold, alpha)
    runs = [r for r in history if r]
    if not samples or len(runs) < MIN_RUNS:
        raise ValueError(f"need samples and at least {MIN_RUNS} previous runs, but got {len(samples)} samples and "
                         f"{len(runs)} run(s)")  # fmt: skip
    now = statistics.median(samples)
    medians = [statistics.median(r) for r in runs]
    if now <= 0 or min(medians) <= 0:
        raise ValueError(f"medians must be > 0 ms, but got {now=} and previous {medians}")
    slowdown = now / statistics.median(medians) - 1.0
    logs = [math.log(m) for m in medians]
    spread = max(statistics.stdev(logs), _median_noise(samples))
    k = len(logs)
    p = 1.0
    if spread > 0:
        score = (math.log(now) - statistics.fmean(logs)) / (spread * math.sqrt(1 + 1 / k))
        p = float(student_t.sf(score if slowdown >= 0 else -score, df=k - 1))
    status: Status = "ok"
    if abs(slowdown) > threshold:  # beyond the threshold: flagged where the spread between runs supports it
        status = ("regressed" if slowdown > 0 else "improved") if p < alpha else "not-significant"
    return Assessment(status=status, slowdown_pct=100.0 * slowdown, p_value=p, spread_pct=100.0 * spread)


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
    on: str = "call"  # what the medians are of: the call time, or a generation's metric ("TTFT", "ms per token")


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


def machine(run: StoredRun) -> str:
    """What a variant run's times depend on: its GPU (or device), and for a run timed on the host's clock (any
    run on a CPU, the ``cpu`` and ``pytorch`` clocks on a GPU) the host's CPU model too (``perflab.cpu``): a
    wall-clock pair's baseline read 5.48 and 2.06 ms on two H100 hosts (docs/results/h100.md)."""
    t = run.tags
    device = t.get("perflab.gpu") or t.get("perflab.device") or "unknown device"
    on_cpu = (t.get("perflab.device") or "").startswith("cpu")
    host_clocked = on_cpu or t.get("perflab.timing_mode") in ("cpu", "pytorch")
    return f"{device} ({t['perflab.cpu']})" if host_clocked and t.get("perflab.cpu") else device


def _software(run: StoredRun, results: _ResultCache) -> str:
    torch, triton = run.tags.get("perflab.torch"), run.tags.get("perflab.triton")
    if torch is None:  # logged before the version tags existed: the result's manifest has them
        manifest = results.get(run.run_id).get("manifest") or {}
        torch, triton = manifest.get("torch"), manifest.get("triton")
    return f"torch {torch or '?'}" + (f", triton {triton}" if triton else "")


def _samples(run: StoredRun, results: _ResultCache) -> tuple[list[float], str]:
    """A run's samples (ms) of what its variant is judged on, and what that is: the call time ("call"); a
    token-generating variant's metric, as its pair's speedup is (``Generation.speedup_metric``): every request's
    TTFT, every token's TPOT or ITL ("TTFT"), each generation's tail for a percentile ("TTFT p99 per generation"),
    the milliseconds per token of each generation's rate for a throughput ("ms per token")."""
    result = results.get(run.run_id)
    gen = result.get("generation") or {}
    metric = gen.get("speedup_metric") or "time"
    if metric == "throughput":
        return [1e3 / r for r in gen.get("tokens_per_s_samples") or [] if r > 0], "ms per token"
    name, _, q = metric.partition("_")
    if metric != "time" and gen.get(f"{name}_samples_ms"):
        rows = [[float(v) for v in row if v is not None] for row in gen[f"{name}_samples_ms"]]
        if q:  # a tail: one value per generation (its requests', its tokens'), their spread between generations
            return [float(np.percentile(r, float(q[1:]))) for r in rows if r], f"{name.upper()} {q} per generation"
        return [v for r in rows for v in r], name.upper()
    timing = result.get("timing") or {}
    return [float(x) for x in timing.get("samples_ms") or []], "call"


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
    hardware = machine(run)
    row = RegressionRow(key=key, run_id=run.run_id, status="not-measured", hardware=hardware)
    if t.get("perflab.status") != "ok":
        row.reason = f"this run's status is {t.get('perflab.status')!r}, not 'ok'"
        return row
    row.software = software = _software(run, results)
    samples, row.on = _samples(run, results)
    if not samples:
        row.reason = f"this run's result.json has no samples of its {row.on} time"
        return row
    row.median_ms = statistics.median(samples)

    earlier = [
        r
        for r in benchmark_runs(None, t["perflab.chapter"], t["perflab.example"], t["perflab.variant"], tracking_uri)
        if r.run_id != run.run_id and r.start_time <= run.start_time
    ]
    not_ok: Counter[str] = Counter()
    other_hw: Counter[str] = Counter()
    other_sw: Counter[str] = Counter()
    other_on: Counter[str] = Counter()  # judged on another metric (the benchmark's declared one changed)
    used: list[StoredRun] = []
    history: list[list[float]] = []
    for r in earlier:  # newest first
        if r.tags.get("perflab.status") != "ok":
            not_ok[r.tags.get("perflab.status", "?")] += 1
        elif machine(r) != hardware:
            other_hw[machine(r)] += 1
        elif (sw := _software(r, results)) != software:
            other_sw[sw] += 1
        elif (seen := _samples(r, results))[1] != row.on:
            other_on[seen[1]] += 1
        elif seen[0]:
            used.append(r)
            history.append(seen[0])
            if len(used) == k:
                break
    row.k_used = len(used)
    row.history_run_ids = [r.run_id for r in used]
    if used:
        row.history_median_ms = statistics.median(statistics.median(h) for h in history)
        row.slowdown_pct = 100.0 * (row.median_ms / row.history_median_ms - 1.0)
    if len(used) < MIN_RUNS:
        row.status = "no-history"
        seen = (_others(other_hw, "on") + _others(other_sw, "with") + _others(other_on, "judged on")
                + _others(not_ok, "with status"))  # fmt: skip
        found = "no previous ok run" if not used else f"only {len(used)} previous ok run"
        row.reason = (
            f"{found} of {key} on {hardware} with {software}"
            + (f" (earlier runs: {'; '.join(seen)})" if seen else "")
            + (f"; a verdict needs {MIN_RUNS}: the spread between runs" if used else "")
        )
        return row
    verdict = assess(samples, history, threshold, alpha)
    row.status, row.slowdown_pct, row.p_value = verdict.status, verdict.slowdown_pct, verdict.p_value
    row.reason = (
        f"{'' if row.on == 'call' else row.on + ' '}median {verdict.slowdown_pct:+.1f} % vs the median of {len(used)} "
        f"previous runs' medians (spread between runs {verdict.spread_pct:.1f} %), p={p_text(verdict.p_value)} "
        f"(flag: > {100 * threshold:g} % and p < {alpha:g})"
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
    run.check_suite(run_id)
    run_id = run.run_id  # the whole id of a prefix given
    runs = [run] if run.is_variant else campaign_of(run, tracking_uri).child_runs(tracking_uri)
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


def p_text(p: float | None) -> str:
    """A p-value in two significant digits, trailing zeros kept (``0.080``, ``0.50``, ``0.010``: one digit read
    0.08, 0.5 and 0.01 whether 0.0096 or 0.014), ``<0.001`` below that; ``—`` for none."""
    if p is None:
        return "—"
    return "<0.001" if p < 0.001 else f"{p:#.2g}"


def regression_table(rows: list[RegressionRow], width: int = 80) -> Any:
    """A rich table, one short row per variant (what the verdict rests on in the notes, ``regression_notes``);
    the medians in one unit, named in the header; a one-chapter suite's names without their chapter."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from bench.cli import fitted, name_lines
    from bench.record import column

    chapters = {r.key.split(":", 1)[0] for r in rows}
    prefix = f"{chapters.pop()}:" if len(chapters) == 1 else ""
    unit = column(x for r in rows for x in (r.median_ms, r.history_median_ms))
    cells = [[r.key.removeprefix(prefix), r.status, unit.text(r.median_ms), unit.text(r.history_median_ms),
              "—" if r.slowdown_pct is None else f"{r.slowdown_pct:+.1f} %",
              p_text(r.p_value), str(r.k_used)] for r in rows]  # fmt: skip
    headers = ["variant", "verdict", f"now {unit.name}", f"before {unit.name}", "change", "p", "runs"]
    if any(r.on != "call" for r in rows):  # a generation's metric (TTFT, TPOT, ms per token), named as the run's
        headers.insert(2, "on")
        cells = [[c[0], c[1], r.on, *c[2:]] for c, r in zip(cells, rows, strict=True)]
    shift = len(headers) - 7
    widths = fitted(headers, cells, width, narrow={1: 9, 2 + shift: 6, 3 + shift: 6})
    title = f"{prefix.rstrip(':') or 'suite'}: each variant against its previous runs"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i < 2 + shift else "right", overflow="fold", width=widths[i])
    colour = {"regressed": "red", "improved": "green", "ok": "default", "not-significant": "yellow",
              "no-history": "yellow"}  # fmt: skip
    for row in cells:
        table.add_row(Text(name_lines(row[0], widths[0])), Text(row[1], colour.get(row[1], "magenta")), *row[2:])
    return table


def regression_notes(rows: list[RegressionRow]) -> list[str]:
    """Under the table: what the runs were compared on, why a variant has no verdict, and what a change beyond the
    threshold but not significant rests on (its change, the runs and their spread, p)."""
    compared = sorted({f"{r.hardware}, {r.software}" for r in rows if r.status not in ("not-measured",)})
    notes = [f"compared on {c}" for c in compared]
    notes += [f"{r.key}: {r.reason}" for r in rows if r.status in ("not-significant", "no-history", "not-measured")]
    return notes
