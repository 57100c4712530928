"""Suite summaries: one JSON-able dict, and Markdown rendered from it (the parent run's artifacts)."""

from __future__ import annotations

import math
from typing import Any

from bench.define.result import SuiteResult


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def summary_dict(suite: SuiteResult) -> dict[str, Any]:
    by_key = {v.spec.key: v for v in suite.variants}
    pairs = []
    for c in suite.comparisons:
        opt = by_key[f"{c.chapter}:{c.example}:{c.variant}"]
        pairs.append(
            {
                "chapter": c.chapter,
                "example": c.example,
                "variant": c.variant,
                "status": c.status,
                "baseline_status": c.baseline_status,
                "optimized_status": c.optimized_status,
                "baseline_median_ms": c.baseline_median_ms,
                "optimized_median_ms": c.optimized_median_ms,
                "speedup": c.speedup,
                "speedup_ci_low": c.speedup_ci_low,
                "speedup_ci_high": c.speedup_ci_high,
                "speedup_time": c.speedup_time,
                "significance": c.significance,
                "verified": c.verification.verified,
                "verification": c.verification.detail,
                "max_rel_error": c.verification.max_rel_error,
                "device": opt.device,
                **{f"optimized_{k}": v for k, v in opt.derived_metrics().items()},
            }
        )
    good: list[float] = [float(p["speedup"]) for p in pairs if p["status"] == "ok" and p["speedup"]]
    faster = [p for p in pairs if p["status"] == "ok" and p["significance"] == "faster"]
    variants = [
        {
            "key": v.spec.key,
            "status": v.status,
            "failed_stage": v.failed_stage,
            "median_ms": v.median_ms,
            "error": v.error.message if v.error else None,
        }
        for v in suite.variants
    ]
    return {
        "n_variants": len(suite.variants),
        "n_variants_ok": sum(v.status == "ok" for v in suite.variants),
        "n_pairs": len(pairs),
        "n_pairs_verified": sum(p["verified"] for p in pairs),
        # A success: verified, ok, and the speedup's 95 % interval above 1.0.
        "n_pairs_faster": len(faster),
        # Geometric mean over verified, successful pairs only: an unverified speedup is not a success.
        "geomean_speedup_verified": math.exp(sum(math.log(x) for x in good) / len(good)) if good else None,
        "unpaired_baselines": suite.unpaired,
        "wall_s": suite.wall_s,
        "time_breakdown": suite.time_breakdown(),
        "timeline": suite.timeline,
        "pairs": pairs,
        "variants": variants,
    }


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# perflab summary",
        "",
        f"{summary['n_variants_ok']}/{summary['n_variants']} variants ok, "
        f"{summary['n_pairs_verified']}/{summary['n_pairs']} pairs verified "
        f"({summary.get('n_pairs_faster', 0)} significantly faster), "
        f"geomean speedup of verified pairs: {_fmt(summary['geomean_speedup_verified'], '.2f')}×, "
        f"wall {summary['wall_s']:.1f} s",
        "",
        "| example | variant | baseline ms | optimized ms | speedup (95 % interval) | verified | status | GB/s |",
        "|---|---|---:|---:|---:|---|---|---:|",
    ]
    for p in summary["pairs"]:
        speedup = speedup_text(p)
        if p["speedup"] and p["status"] != "ok":
            speedup += " (not a success)"
        lines.append(
            f"| {p['chapter']}:{p['example']} | {p['variant']} | {_fmt(p['baseline_median_ms'], '.4f')} | "
            f"{_fmt(p['optimized_median_ms'], '.4f')} | {speedup} | {'yes' if p['verified'] else 'no'} | "
            f"{p['status']} | {_fmt(p.get('optimized_achieved_gbps'), '.0f')} |"
        )
    failures = [v for v in summary["variants"] if v["status"] != "ok"]
    if failures:
        lines += ["", "## Variants not ok", "", "| variant | status | stage | error |", "|---|---|---|---|"]
        for v in failures:
            err = (v["error"] or "").replace("|", "\\|").replace("\n", " ")[:200]
            lines.append(f"| {v['key']} | {v['status']} | {v['failed_stage'] or '—'} | {err} |")
    notes = [p for p in summary["pairs"] if not p["verified"]]
    if notes:
        lines += ["", "## Verification notes", ""]
        lines += [f"- {p['chapter']}:{p['example']} {p['variant']}: {p['verification']}" for p in notes]
    if summary["unpaired_baselines"]:
        lines += ["", "Baselines without an optimized partner: " + ", ".join(summary["unpaired_baselines"])]
    return "\n".join(lines) + "\n"


def speedup_text(pair: dict[str, Any]) -> str:
    """``1.73× [1.70, 1.76]``, with "no significant difference" when the interval holds 1.0 and the time
    it is on when that is the batch time."""
    if not pair.get("speedup"):
        return "—"
    text = f"{pair['speedup']:.2f}×"
    low, high = pair.get("speedup_ci_low"), pair.get("speedup_ci_high")
    if low is not None and high is not None:
        text += f" [{low:.2f}, {high:.2f}]"
    if pair.get("speedup_time") == "batch":
        text += " (batch)"
    if pair.get("significance") == "no significant difference":
        text += " no significant difference"
    elif pair.get("significance") == "slower":
        text += " slower"
    return text

