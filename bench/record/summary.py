"""Suite summaries: one JSON-able dict, and Markdown rendered from it (the parent run's artifacts)."""

from __future__ import annotations

import math
from typing import Any

from bench.define.result import SuiteResult
from bench.record.units import ENERGY_UNITS, RATE_UNITS, column

_ROUNDS = ("round_speedups", "rounds_stop")  # a pair measured in interleaved rounds (bench.isolate.rounds)
_ENERGY = ("baseline_energy_mj", "optimized_energy_mj", "energy_ratio", "energy_ratio_ci_low", "energy_ratio_ci_high")


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
                **{k: getattr(c, k) for k in (*_ENERGY, *_ROUNDS)},
                "device": opt.device,
                **{f"optimized_{k}": v for k, v in opt.derived_metrics().items()},
            }
        )
    for p in pairs:
        p["verdict"] = pair_verdict(p)
    good: list[float] = [float(p["speedup"]) for p in pairs if p["status"] == "ok" and p["speedup"]]
    verdicts = [p["verdict"] for p in pairs]
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
        # A success: verified, ok, and the speedup's 95 % interval above 1.0; the others as they are.
        "n_pairs_faster": verdicts.count("faster"),
        "n_pairs_slower": verdicts.count("slower"),
        "n_pairs_no_difference": verdicts.count("no significant difference"),
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
    pairs = summary["pairs"]
    # one unit for both times: a row reads across
    t = column(x for p in pairs for x in (p["baseline_median_ms"], p["optimized_median_ms"]))
    rate = column((p.get("optimized_achieved_gbps") for p in pairs), RATE_UNITS)
    lines = [
        "# perflab summary",
        "",
        f"{summary['n_variants_ok']}/{summary['n_variants']} variants ok, "
        f"{summary['n_pairs_verified']}/{summary['n_pairs']} pairs verified: {counts_text(summary)}; "
        f"geomean speedup of verified pairs: {_fmt(summary['geomean_speedup_verified'], '.2f')}×, "
        f"wall {summary['wall_s']:.1f} s",
        "",
        f"| example | variant | baseline {t.name} | optimized {t.name} | speedup (95 % interval) | verdict | "
        f"optimized {rate.name} |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for p in pairs:
        lines.append(
            f"| {p['chapter']}:{p['example']} | {p['variant']} | {t.text(p['baseline_median_ms'])} | "
            f"{t.text(p['optimized_median_ms'])} | {speedup_text(p, verdict=False)} | {p['verdict']} | "
            f"{rate.text(p.get('optimized_achieved_gbps'))} |"
        )
    lines += _energy_section(pairs)
    failures = [v for v in summary["variants"] if v["status"] != "ok"]
    if failures:
        lines += ["", "## Variants not ok", "", "| variant | status | stage | error |", "|---|---|---|---|"]
        for v in failures:
            err = (v["error"] or "").replace("|", "\\|").replace("\n", " ")[:200]
            lines.append(f"| {v['key']} | {v['status']} | {v['failed_stage'] or '—'} | {err} |")
    notes = [p for p in pairs if not p["verified"]]
    if notes:
        lines += ["", "## Verification notes", ""]
        lines += [f"- {p['chapter']}:{p['example']} {p['variant']}: {p['verification']}" for p in notes]
    if summary["unpaired_baselines"]:
        lines += ["", "Baselines without an optimized partner: " + ", ".join(summary["unpaired_baselines"])]
    return "\n".join(lines) + "\n"


def _energy_section(pairs: list[dict[str, Any]]) -> list[str]:
    """The pairs with both sides' energy per call (``measure_energy``): each side's and their ratio."""
    measured = [p for p in pairs if p.get("energy_ratio") is not None]
    if not measured:
        return []
    e = column((x for p in measured for x in (p["baseline_energy_mj"], p["optimized_energy_mj"])), ENERGY_UNITS)
    lines = ["", "## Energy per call (GPU board, back-to-back calls)", "",
             f"| example | variant | baseline {e.name} | optimized {e.name} | less energy (95 % interval) |",
             "|---|---|---:|---:|---:|"]  # fmt: skip
    for p in measured:
        low, high = p.get("energy_ratio_ci_low"), p.get("energy_ratio_ci_high")
        interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        lines.append(
            f"| {p['chapter']}:{p['example']} | {p['variant']} | {e.text(p['baseline_energy_mj'])} | "
            f"{e.text(p['optimized_energy_mj'])} | {p['energy_ratio']:.2f}×{interval} |"
        )
    return lines


def counts_text(summary: dict[str, Any]) -> str:
    """``5 faster, 1 slower, 2 no significant difference`` (the verified pairs; only the first are successes)."""
    parts = [f"{summary.get('n_pairs_faster', 0)} faster"]
    if summary.get("n_pairs_slower"):
        parts.append(f"{summary['n_pairs_slower']} slower")
    if summary.get("n_pairs_no_difference"):
        parts.append(f"{summary['n_pairs_no_difference']} no significant difference")
    return ", ".join(parts)


def speedup_text(pair: dict[str, Any], verdict: bool = True) -> str:
    """``1.73× [1.70, 1.76]``, the time it is on when that is the batch time, and (``verdict``) the words
    "slower" or "no significant difference" when the pair is not faster."""
    if not pair.get("speedup"):
        return "—"
    text = f"{pair['speedup']:.2f}×"
    low, high = pair.get("speedup_ci_low"), pair.get("speedup_ci_high")
    if low is not None and high is not None:
        text += f" [{low:.2f}, {high:.2f}]"
    if pair.get("speedup_time") == "batch":
        text += " (batch)"
    shown = pair_verdict(pair)
    if verdict and shown in ("slower", "no significant difference"):
        text += f" {shown}"
    return text


def pair_verdict(pair: dict[str, Any]) -> str:
    """What a pair shows, in one word or phrase: ``faster`` (verified, ok, the speedup's 95 % interval above 1),
    ``slower`` (below 1), ``no significant difference`` (holding 1); ``no interval`` for a speedup above 1
    logged without one, ``no speedup`` for a verified pair without one; else the pair's status (``mismatch``,
    ``unverified``, ``failed``, ``skipped``). Only ``faster`` is a success."""
    status = pair.get("status") or "?"
    if status != "ok":
        return str(status)
    speedup = pair.get("speedup")
    if not speedup:
        return "no speedup"
    significance = pair.get("significance")
    if significance:
        return str(significance)
    return "slower" if speedup < 1 else "no interval"
