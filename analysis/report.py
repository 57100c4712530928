"""A suite's report, read back from MLflow: report.json, report.md and report.csv.

Every number comes from the runs' metrics and tags, never from the process that ran the suite, so
a report can be rebuilt for any past suite. Speedup statistics count only pairs whose optimized
variant was verified against its baseline and whose pair status is ``ok``: an unverified speedup is
shown in the table but is not a success.

Beside the tables: ``speedup.png``, ``roofline.png`` (ceilings from the local peak cache of the
suite's hardware, when ``perflab peak`` ran there) and ``latency.png`` (raw samples from each
variant's ``result.json``), all attached to the parent run too.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from bench.measure import ceilings as peaks
from bench.record import (
    ENERGY_UNITS,
    RATE_UNITS,
    Compared,
    StoredRun,
    basis_of,
    campaign_of,
    column,
    latest_suite_run_id,
    log_text_artifacts,
    pair_baseline,
    pair_verdict,
    read_artifact_text,
    read_run,
    results_dir,
    rounds_text,
    speedup_text,
    verdict_text,
    verdicts_text,
)

__all__ = ["CSV_COLUMNS", "build_report", "charts", "report_csv", "report_markdown", "write_report"]

_FAILED = frozenset({"failed", "timeout", "invalid"})
CSV_COLUMNS = (
    "chapter",
    "example",
    "variant",
    "baseline_median_ms",
    "optimized_median_ms",
    "speedup_on",
    "baseline_value",
    "optimized_value",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "verified",
    "status",
    "verdict",
    "counted",
    "rounds",
    "rounds_left_out",
    "baseline_gbps",
    "optimized_gbps",
    "optimized_pct_of_peak",
    "hardware",
    "run_id",
    "baseline_energy_mj",
    "optimized_energy_mj",
    "energy_ratio",
    "energy_ratio_ci_low",
    "energy_ratio_ci_high",
)


def _geomean(xs: list[float]) -> float | None:
    # Speedups are ratios: 2x and 0.5x cancel to 1x under a geometric mean, not to 1.25x.
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _pct_of_peak(m: dict[str, float], ceilings: dict[str, float] | None) -> float | None:
    """As logged (``m``: a run's metrics, at the median its row shows); else, for a bytes-only run logged before
    its device's peak was cached, achieved GB/s ÷ the copy ceiling (a run with FLOPs needs its dtype, which only
    the logging side knows)."""
    if "pct_of_peak" in m or not ceilings or "achieved_tflops" in m:
        return m.get("pct_of_peak")
    pct = peaks.pct_of_peak(m.get("achieved_gbps"), None, ceilings)
    return pct[0] if pct else None


def _hardware(run: StoredRun) -> str | None:
    return run.tags.get("perflab.hardware") or run.tags.get("perflab.gpu")


def _pair_row(run: StoredRun, baseline: StoredRun | None, ceilings: dict[str, float] | None = None) -> dict[str, Any]:
    t, m = run.tags, run.metrics
    speedup = m.get("speedup")
    on = basis_of({"speedup_metric": t.get("perflab.speedup_metric"), "speedup_time": t.get("perflab.speedup_time")})
    b = pair_baseline(m, baseline.metrics if baseline else {}, on.metric)
    o = pair_baseline(m, m, on.metric, "optimized")  # over the rounds its speedup was taken over (some left out)
    verified = t.get("perflab.verified") == "true"
    status = t.get("perflab.pair_status") or t.get("perflab.status", "?")
    return {
        "chapter": t["perflab.chapter"],
        "example": t["perflab.example"],
        "variant": t["perflab.variant"],
        "baseline_median_ms": b.get("time_median_ms"),
        "optimized_median_ms": o.get("time_median_ms"),
        # what the speedup is on (bench.measure.basis) and the two values it divides, from each side's run
        "speedup_on": on.label,
        "speedup_metric": t.get("perflab.speedup_metric", "time"),
        "baseline_value": b.get(on.metric),
        "optimized_value": o.get(on.metric),
        "speedup": speedup,
        "speedup_ci_low": m.get("speedup_ci_low"),
        "speedup_ci_high": m.get("speedup_ci_high"),
        "speedup_time": t.get("perflab.speedup_time", "cold"),
        "significance": t.get("perflab.significance"),
        # a pair in rounds: how many its speedup kept and why no more ran ("8 max_rounds"), those left out ("1,4")
        "rounds": t.get("perflab.rounds"),
        "rounds_left_out": t.get("perflab.rounds_left_out"),
        "verified": verified,
        "status": status,
        "counted": bool(verified and status == "ok" and speedup and speedup > 0 and math.isfinite(speedup)),
        "verdict": pair_verdict(
            {"status": status, "speedup": speedup, "significance": t.get("perflab.significance")}
        ),  # fmt: skip
        # rates at the medians shown: the pair's, over the rounds its speedup kept (bench.record.pair_baseline)
        "baseline_gbps": b.get("achieved_gbps") if baseline else None,
        "optimized_gbps": o.get("achieved_gbps"),
        "optimized_pct_of_peak": _pct_of_peak(o, ceilings),
        "hardware": _hardware(run),
        "run_id": run.run_id,
        # the two files timed (SHA-256 as found; imports not in it): two suites' same pair on the same code or not
        "source_sha256": [
            baseline.tags.get("perflab.source_sha256") if baseline else None,
            t.get("perflab.source_sha256"),
        ],  # fmt: skip
        # with --energy: each side's energy per call, and baseline / optimized with its interval
        "baseline_energy_mj": b.get("energy_per_call_mj"),
        "optimized_energy_mj": m.get("energy_per_call_mj"),
        **{k: m.get(k) for k in ("energy_ratio", "energy_ratio_ci_low", "energy_ratio_ci_high")},
        # for the roofline chart (JSON only)
        "baseline_tflops": b.get("achieved_tflops"),
        "optimized_tflops": o.get("achieved_tflops"),
        "baseline_intensity": b.get("arithmetic_intensity"),
        "optimized_intensity": m.get("arithmetic_intensity"),
        "baseline_run_id": baseline.run_id if baseline else None,
    }


def build_report(parent: StoredRun, runs: list[StoredRun]) -> dict[str, Any]:
    """The report as one JSON-able dict: ``overall``, ``chapters`` (rows per chapter), ``not_ok``."""
    variants = [r for r in runs if r.is_variant]
    by_name = {r.name: r for r in variants}
    hardware = sorted({h for r in variants if (h := _hardware(r))})
    ceilings = {h: peaks.lookup(h) for h in hardware}
    rows = []
    for r in variants:
        t = r.tags
        if t["perflab.variant"] == "baseline":
            continue
        base = by_name.get(f"{t['perflab.chapter']}:{t['perflab.example']}:baseline")
        rows.append(_pair_row(r, base, ceilings.get(_hardware(r) or "")))
    rows.sort(key=lambda x: (x["chapter"], x["example"], x["variant"]))
    counted = [x["speedup"] for x in rows if x["counted"]]
    statuses = [r.tags.get("perflab.status", "?") for r in variants]
    chapters: dict[str, list[dict[str, Any]]] = {}
    for x in rows:
        chapters.setdefault(x["chapter"], []).append(x)
    overall = {
        "parent_run_id": parent.run_id,
        "parent_run_name": parent.name,
        # where variants ran: a skipped one ran nowhere (its device tag the config's "auto")
        "devices": sorted(
            {
                r.tags.get("perflab.gpu") or r.tags.get("perflab.device", "?")
                for r in variants
                if r.tags.get("perflab.status") != "skipped"
            }
        ),  # fmt: skip
        "chapters": len({r.tags["perflab.chapter"] for r in variants}),
        "benchmarks": len({(r.tags["perflab.chapter"], r.tags["perflab.example"]) for r in variants}),
        "variants": len(variants),
        "succeeded": sum(s == "ok" for s in statuses),
        "failed": sum(s in _FAILED for s in statuses),
        "skipped": sum(s == "skipped" for s in statuses),
        "pairs": len(rows),
        "pairs_verified": sum(x["verified"] for x in rows),
        "pairs_counted": len(counted),
        # successes: counted, and the speedup's 95 % interval above 1 + noise_threshold; the others as they are
        "pairs_faster": sum(x["counted"] and x["verdict"] == "faster" for x in rows),
        "pairs_slower": sum(x["counted"] and x["verdict"] == "slower" for x in rows),
        "pairs_no_difference": sum(x["counted"] and x["verdict"] == "no significant difference" for x in rows),
        # every pair under its verdict (bench.record.VERDICTS): the counts add up to ``pairs``
        "verdicts": dict(Counter(x["verdict"] for x in rows)),
        "speedup_geomean": _geomean(counted),
        "speedup_max": max(counted) if counted else None,
        "speedup_min": min(counted) if counted else None,
        "hardware": hardware,
        "ceilings": ceilings,  # {hardware: ceilings from the local peak cache, or None}
    }
    not_ok = [
        {
            "name": r.name,
            "status": r.tags.get("perflab.status", "?"),
            "stage": r.tags.get("perflab.failed_stage"),
            "error": r.tags.get("perflab.error") or r.tags.get("perflab.skip_reason"),  # a skipped one's: why
        }
        for r in variants
        if r.tags.get("perflab.status") != "ok"
    ]
    return {"overall": overall, "chapters": chapters, "not_ok": not_ok}


def _f(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def report_markdown(report: dict[str, Any]) -> str:
    o = report["overall"]
    lines = [
        f"# perflab report: {o['parent_run_name'] or o['parent_run_id']}",
        "",
        f"MLflow parent run `{o['parent_run_id']}`; device(s): {', '.join(o['devices']) or '—'}",
        *([f"\n{o['campaign']}"] if o.get("campaign") else []),
        "",
        f"- {o['chapters']} chapter(s), {o['benchmarks']} benchmark(s), {o['variants']} variant(s): "
        f"{o['succeeded']} succeeded, {o['failed']} failed, {o['skipped']} skipped",
        f"- {verdicts_text(o.get('verdicts', {}), o['pairs'])} (faster: verified, interval above 1 and the "
        f"noise threshold; 95 %, or 96–98 % for a pair in rounds); {o['pairs_verified']} verified",
        f"- speedup over the {o['pairs_counted']} verified ok pair(s): geomean {_f(o['speedup_geomean'], '.3f')}×, "
        f"max {_f(o['speedup_max'], '.3f')}×, min {_f(o['speedup_min'], '.3f')}×"
        if o["pairs_counted"]
        else "- no verified ok pair: no speedup geomean, max or min",
    ]
    for chapter, rows in sorted(report["chapters"].items()):
        t = column(x for r in rows for x in (r["baseline_median_ms"], r["optimized_median_ms"]))
        rate = column((x for r in rows for x in (r["baseline_gbps"], r["optimized_gbps"])), RATE_UNITS)
        on = Compared(rows)
        rounds = any(r.get("rounds") for r in rows)  # as the run's table: how many kept, why no more ran, left out
        lines += [
            "",
            f"## {chapter}",
            "",
            f"| example | variant | baseline median {t.name} | optimized median {t.name} |{on.header} speedup | "
            f"verdict | verified | baseline {rate.name} | optimized {rate.name} | optimized % of peak |"
            + " rounds |"
            * rounds,
            f"|---|---|---:|---:|{on.rule}---:|---|---|---:|---:|---:|" + "---|" * rounds,
        ]
        for x in rows:
            speedup = speedup_text(x, verdict=False)
            if x["speedup"] is not None and not x["counted"]:
                speedup += " (not counted)"
            lines.append(
                f"| {x['example']} | {x['variant']} | {t.text(x['baseline_median_ms'])} | "
                f"{t.text(x['optimized_median_ms'])} |{on.cells(x)} {speedup} | {verdict_text(x)} | "
                f"{'yes' if x['verified'] else 'no'} | {rate.text(x['baseline_gbps'])} | "
                f"{rate.text(x['optimized_gbps'])} | {_f(x['optimized_pct_of_peak'], '.1f')} |"
                + (f" {rounds_text(x.get('rounds'), x.get('rounds_left_out'), x['speedup'])} |" if rounds else "")
            )
        lines += _energy_lines(rows)
    lines += ["", "![speedups](speedup.png)", "", "![roofline](roofline.png)", "", "![latency](latency.png)"]
    missing = [h for h, c in o["ceilings"].items() if not c]
    if missing:
        lines += ["", f"No ceilings cached for {', '.join(missing)}: % of peak and roofline ceilings need "
                  "`perflab peak` on that device."]  # fmt: skip
    if report["not_ok"]:
        lines += ["", "## Variants not ok", "", "| variant | status | stage | error |", "|---|---|---|---|"]
        for v in report["not_ok"]:
            err = (v["error"] or "").replace("|", "\\|").replace("\n", " ")[:200]
            lines.append(f"| {v['name']} | {v['status']} | {v['stage'] or '—'} | {err} |")
    return "\n".join(lines) + "\n"


def _energy_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The chapter's pairs measured with ``--energy``: each side's energy per call and how many times less."""
    measured = [x for x in rows if x.get("energy_ratio") is not None]
    if not measured:
        return []
    e = column((v for x in measured for v in (x["baseline_energy_mj"], x["optimized_energy_mj"])), ENERGY_UNITS)
    lines = ["", f"| example | variant | baseline {e.name} per call | optimized {e.name} per call | less energy |",
             "|---|---|---:|---:|---:|"]  # fmt: skip
    for x in measured:
        low, high = x.get("energy_ratio_ci_low"), x.get("energy_ratio_ci_high")
        interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        lines.append(f"| {x['example']} | {x['variant']} | {e.text(x['baseline_energy_mj'])} | "
                     f"{e.text(x['optimized_energy_mj'])} | {x['energy_ratio']:.2f}×{interval} |")  # fmt: skip
    return lines


def report_csv(report: dict[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for chapter in sorted(report["chapters"]):
        for x in report["chapters"][chapter]:
            writer.writerow({k: "" if x[k] is None else x[k] for k in CSV_COLUMNS})
    return buf.getvalue()


def write_report(
    run_id: str | None, out: Path | None, tracking_uri: str | None = None, log: bool = True
) -> tuple[dict[str, Any], Path]:
    """Build the report of a suite (default: the latest completed one), write the three files to
    ``out`` (default ``perflab-results/report-<run id prefix>``, git-ignored) and, with ``log``, attach them to the
    parent run. ``LookupError`` for an unknown run; ``ValueError`` when it is not a suite."""
    if not run_id:  # None, or "" from the MLproject entry point's default
        run_id = latest_suite_run_id(tracking_uri)
    parent = read_run(run_id, tracking_uri)
    if parent.is_variant:
        raise ValueError(
            f"run {run_id!r} is the variant run {parent.name!r}; pass its suite's parent run {parent.parent_id!r}"
        )
    parent.check_suite(run_id)
    run_id = parent.run_id  # the whole id of a prefix given
    campaign = campaign_of(parent, tracking_uri)
    runs = parent.check_variants(run_id, campaign.child_runs(tracking_uri))
    report = build_report(parent, runs)
    report["overall"]["campaign"] = campaign.line()  # a suite in parts: how many found, which missing
    files: dict[str, str | bytes] = {
        "report.json": json.dumps(report, indent=2),
        "report.md": report_markdown(report),
        "report.csv": report_csv(report),
        **charts(report, runs, tracking_uri),
    }
    out = out or results_dir() / f"report-{run_id[:8]}"
    out.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if isinstance(content, bytes):
            (out / name).write_bytes(content)
        else:
            (out / name).write_text(content)
    if log:
        log_text_artifacts(run_id, files, tracking_uri)
    return report, out


def raw_samples(runs: list[StoredRun], tracking_uri: str | None = None) -> dict[str, list[float]]:
    """``{variant run name: raw samples (ms)}`` from each measured variant's ``result.json``."""
    out: dict[str, list[float]] = {}
    for r in runs:
        if not r.is_variant or "time_median_ms" not in r.metrics:
            continue
        try:
            timing = json.loads(read_artifact_text(r.run_id, "result.json", tracking_uri)).get("timing")
        except LookupError:
            continue
        if timing and timing.get("samples_ms"):
            out[r.name] = [float(x) for x in timing["samples_ms"]]
    return out


def charts(report: dict[str, Any], runs: list[StoredRun], tracking_uri: str | None = None) -> dict[str, bytes]:
    """The report's PNGs: speedup.png, roofline.png, latency.png."""
    from analysis import plots

    o = report["overall"]
    rows = [x for chapter in sorted(report["chapters"]) for x in report["chapters"][chapter]]
    name = o["parent_run_name"] or o["parent_run_id"]
    hardware = o["hardware"][0] if o["hardware"] else "unknown hardware"
    return {
        "speedup.png": plots.speedup_png(rows, f"Speedups — {name} ({o['parent_run_id'][:8]})"),
        "roofline.png": plots.roofline_png(
            [x for x in rows if x["hardware"] in (hardware, None)], o["ceilings"].get(hardware), hardware
        ),
        "latency.png": plots.latency_png(raw_samples(runs, tracking_uri), f"Latency distributions — {name}"),
    }
