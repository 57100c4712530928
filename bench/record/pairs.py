"""What an optimized variant's run carries of its pair, and how a reader shows a pair from it.

``comparison_tags`` and ``comparison_metrics`` are logged on the optimized variant's run beside its own metrics
(``bench.record.contract``). A pair measured in rounds may leave some out of its speedup (a round the host's load
disturbed: bench.isolate.rounds); each side's run keeps every round, so its median and the rates taken from it
(``time_median_ms``, ``achieved_gbps``, ``pct_of_peak`` ...) describe all its samples, while the pair's row shows
the medians over the rounds its speedup was taken over (``pair_baseline_median_ms``,
``pair_optimized_median_ms``). ``pair_baseline`` gives a row both: the pair's medians and the rates at them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from bench.define.result import Comparison
from bench.record.contract import clip

# Metrics that are declared work (or a stated least time) ÷ the median call time: at another median, each scales
# by the ratio of the two medians (bench.define.result.VariantResult.derived_metrics, bench.measure.ceilings).
RATES = ("achieved_gbps", "achieved_tflops", "algbw_gbps", "busbw_gbps", "pct_of_peak")


def comparison_tags(comparison: Comparison, baseline_run_id: str | None) -> dict[str, str]:
    """Tags of an optimized variant's run from its pair: verification, speedup basis, significance."""
    v = comparison.verification
    tags = {
        "perflab.pair_status": comparison.status,
        "perflab.verified": "true" if v.verified else "false",
        "perflab.verification": clip(v.detail),
        "perflab.speedup_time": comparison.speedup_time,
        "perflab.speedup_metric": comparison.speedup_metric,  # time, or a generation pair's ttft/tpot/throughput
    }
    if comparison.significance is not None:
        tags["perflab.significance"] = comparison.significance
    if comparison.round_speedups:
        tags["perflab.rounds"] = f"{len(comparison.round_speedups)} {comparison.rounds_stop or ''}".strip()
    if comparison.rounds_left_out:  # rounds whose host was busy: not in the speedup (bench.isolate.rounds)
        tags["perflab.rounds_left_out"] = ",".join(map(str, comparison.rounds_left_out))
    if baseline_run_id is not None:
        tags["perflab.baseline_run_id"] = baseline_run_id
    return tags


def comparison_metrics(comparison: Comparison) -> dict[str, float]:
    """``speedup``, its interval, ``energy_ratio`` and its interval, ``max_rel_error``, each side's median and value
    as the pair saw them: those that are finite."""
    ratios = ("speedup", "energy_ratio")
    values = {f"{r}{end}": getattr(comparison, f"{r}{end}") for r in ratios for end in ("", "_ci_low", "_ci_high")}
    values["max_rel_error"] = comparison.verification.max_rel_error
    # Each side over the rounds its speedup was taken over (the baseline's own run holds all its rounds, more where
    # another pair of the example ran on; the variant's, the rounds left out too): the median and value its row shows.
    values |= {f"pair_{s}_{k}": getattr(comparison, f"{s}_{k}") for s in ("baseline", "optimized")
               for k in ("median_ms", "value")}  # fmt: skip
    return {k: float(v) for k, v in values.items() if v is not None and math.isfinite(v)}


def at_median(metrics: Mapping[str, float], median_ms: float | None) -> dict[str, float]:
    """``metrics`` (a run's, its ``time_median_ms`` the median its rates were taken at) with ``time_median_ms``
    ``median_ms`` and each of ``RATES`` taken at it: what a row shows beside another median of the same samples'
    side (a pair's, over the rounds its speedup kept). A rate whose run holds no median is left out."""
    seen = dict(metrics)
    own = metrics.get("time_median_ms")
    if median_ms is None or own == median_ms:
        return seen
    seen["time_median_ms"] = median_ms
    for key in RATES:
        if key in seen:
            if own and own > 0 and median_ms > 0 and math.isfinite(median_ms):
                seen[key] = metrics[key] * own / median_ms
            else:  # no median of its own to scale from: no rate to show beside this one
                del seen[key]
    return seen


def pair_baseline(optimized: Mapping[str, float], run: Mapping[str, float], held: str, side: str = "baseline") -> dict:
    """The baseline's run metrics (``side="optimized"``: the variant's own) as an optimized variant's pair saw them:
    the median and the value on the speedup's basis (``held``: the metric both runs hold it under) of the pair's
    rounds, where the variant's run logged them (``comparison_metrics``), and the rates (``RATES``) at that median:
    the row divides what its speedup divided, and its GB/s and % of peak are of the median it shows."""
    seen = at_median(run, optimized.get(f"pair_{side}_median_ms"))
    if f"pair_{side}_value" in optimized:
        seen[held] = optimized[f"pair_{side}_value"]
    return seen
