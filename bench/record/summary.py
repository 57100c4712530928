"""Suite summaries: one JSON-able dict, and Markdown rendered from it (the parent run's artifacts)."""

from __future__ import annotations

import math
from typing import Any

from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.measure.basis import Basis, basis
from bench.measure.stats import within_noise
from bench.record.pairs import at_median
from bench.record.text import markdown_text
from bench.record.units import ENERGY_UNITS, RATE_UNITS, column, ratio_text, sig, time_text

# Every verdict a pair can get (``pair_verdict``), in the order the summary lines count them; README.md
# ("Reading the verdicts") explains each, and a test holds the two together.
VERDICTS = (
    "faster", "slower", "no significant difference", "no interval", "no speedup", "mismatch", "unverified", "failed",
    "skipped",
)  # fmt: skip

# a pair measured in interleaved rounds (bench.isolate.rounds)
_ROUNDS = ("round_speedups", "rounds_stop", "rounds_left_out")
_ENERGY = ("baseline_energy_mj", "optimized_energy_mj", "energy_ratio", "energy_ratio_ci_low", "energy_ratio_ci_high")
# Where a suite's time went, part by part, as people name it (``stage_split``): each part's label, and the child's
# stages (bench.define.result.STAGES) it sums. "checks" adds the parent's output comparison, "profile" the profile
# children's time, "logging" the time spent keeping and logging results.
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "start": ("start", ("startup",)), "setup": ("set-up", ("setup",)), "warmup": ("warm-up", ("warmup",)),
    "measurement": ("measurement", ("measurement",)), "checks": ("checks", ("check", "recheck")),
    "batch": ("batch", ("batch",)), "energy": ("energy", ("energy",)), "profile": ("profile", ()),
    "teardown": ("teardown", ("teardown",)), "logging": ("logging", ()),
}  # fmt: skip
_OPTIONAL_PARTS = ("energy", "teardown")  # shown only when they took time


def _geomean_text(x: float | None) -> str:
    """The suite's geomean as the rows' speedups read (``ratio_text``): a geomean of 0.0038 is no ``0.00×``."""
    return "—" if x is None else f"{ratio_text(x)}×"


def summary_dict(suite: SuiteResult, logging_s: float | None = None, command_s: float | None = None) -> dict[str, Any]:
    """The suite's summary (``summary.json``); ``logging_s``: the time spent keeping and logging its results,
    ``command_s``: the command's own start until its first variant began, when known (``stage_split``)."""
    by_key = {v.spec.key: v for v in suite.variants}
    pairs = [_pair(c, by_key[f"{c.chapter}:{c.example}:{c.variant}"]) for c in suite.comparisons]
    for p in pairs:
        p["verdict"] = pair_verdict(p)
    good: list[float] = [float(p["speedup"]) for p in pairs if p["status"] == "ok" and p["speedup"]]
    verdicts = [p["verdict"] for p in pairs]
    variants = [{"key": v.spec.key, "status": v.status, "failed_stage": v.failed_stage, "median_ms": v.median_ms,
                 "elapsed_s": v.elapsed_s, "error": v.error.message if v.error else None}
                for v in suite.variants]  # fmt: skip
    return {
        "n_variants": len(suite.variants),
        "n_variants_ok": sum(v.status == "ok" for v in suite.variants),
        "n_pairs": len(pairs),
        "n_pairs_verified": sum(p["verified"] for p in pairs),
        # A success: verified, ok, and the speedup's 95 % interval above 1 + noise_threshold; the others as they are.
        "n_pairs_faster": verdicts.count("faster"),
        "n_pairs_slower": verdicts.count("slower"),
        "n_pairs_no_difference": verdicts.count("no significant difference"),
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts), key=_verdict_order)},  # every pair's
        # Geometric mean over verified, successful pairs only: an unverified speedup is not a success.
        "geomean_speedup_verified": math.exp(sum(math.log(x) for x in good) / len(good)) if good else None,
        "unpaired_baselines": suite.unpaired,
        "wall_s": suite.wall_s,
        **_time_split(suite, logging_s, command_s),
        "time_breakdown": suite.time_breakdown(),
        "timeline": suite.timeline,
        "pairs": pairs,
        "variants": variants,
    }


def _pair(c: Comparison, opt: VariantResult) -> dict[str, Any]:
    """One pair of the summary: the comparison's figures and the optimized variant's device and rates."""
    own = {"time_median_ms": opt.median_ms, **opt.derived_metrics()} if opt.median_ms else {}
    return {
        **c.model_dump(
            include={
                "chapter",
                "example",
                "variant",
                "status",
                "baseline_status",
                "optimized_status",
                "baseline_median_ms",
                "optimized_median_ms",
                "speedup",
                "speedup_ci_low",
                "speedup_ci_high",
                "speedup_time",
                "speedup_metric",
                "baseline_value",
                "optimized_value",
                "significance",
                "noise_threshold",
                *_ENERGY,
                *_ROUNDS,
            }
        ),  # fmt: skip
        "verified": c.verification.verified,
        "verification": c.verification.detail,
        "max_rel_error": c.verification.max_rel_error,
        "device": opt.device,
        # its rates at the median the row shows: the pair's, over the rounds its speedup kept (bench.record.pairs)
        **{f"optimized_{k}": v for k, v in at_median(own, c.optimized_median_ms).items() if k != "time_median_ms"},
    }


def _time_split(suite: SuiteResult, logging_s: float | None, command_s: float | None) -> dict[str, Any]:
    """``stages_s``: seconds per part summed over the variants (several workers, and logging beside them: more than
    the wall), and ``stages_s_by_chapter``: each chapter's own."""
    return {
        "stages_s": stage_split(suite.variants, suite.timeline, logging_s, command_s),
        "stages_s_by_chapter": {
            ch: stage_split(
                [v for v in suite.variants if v.spec.chapter == ch],
                [t for t in suite.timeline if str(t.get("key", "")).startswith(f"{ch}:")],
            )
            for ch in sorted({v.spec.chapter for v in suite.variants})
        },
    }


def stage_split(
    variants: list[VariantResult], timeline: list[dict[str, Any]], logging_s: float | None = None,
    command_s: float | None = None,
) -> dict[str, float]:  # fmt: skip
    """Seconds per part of ``PARTS`` summed over ``variants``: their children's stages, the parent's output
    comparisons (``timeline``'s compare_s: "checks"), the profile children ("profile"); "start" adds ``command_s``
    (the command's own start: interpreter, imports, the pre-warmed server), "logging" is ``logging_s`` (each 0 when
    unknown: no chapter's share of them is measured)."""
    out = dict.fromkeys(PARTS, 0.0)
    out["start"] = command_s or 0.0
    part_of = {stage: part for part, (_, stages) in PARTS.items() for stage in stages}
    for v in variants:
        for record in v.stages:
            if record.duration_s is not None and record.name in part_of:
                out[part_of[record.name]] += record.duration_s
        if v.profile is not None and v.profile.wall_s:
            out["profile"] += v.profile.wall_s
    out["checks"] += sum(float(t.get("compare_s") or 0.0) for t in timeline)
    out["logging"] = logging_s or 0.0
    return out


def stage_line(stages: dict[str, float], n_variants: int) -> str:
    """``stages (summed over 16 variants): start 3.1 s, set-up 1.0 s, ... logging 2.0 s; most: measurement``."""
    shown = [(PARTS[p][0], s) for p, s in stages.items() if p not in _OPTIONAL_PARTS or s >= 0.05]
    most = max(stages, key=lambda p: stages[p]) if any(stages.values()) else None
    text = ", ".join(f"{label} {s:.1f} s" for label, s in shown)
    return f"stages (summed over {n_variants} variants): {text}" + (f"; most: {PARTS[most][0]}" if most else "")


def summary_markdown(summary: dict[str, Any]) -> str:
    pairs = summary["pairs"]
    # one unit for both times: a row reads across
    t = column(x for p in pairs for x in (p["baseline_median_ms"], p["optimized_median_ms"]))
    rate = column((p.get("optimized_achieved_gbps") for p in pairs), RATE_UNITS)
    on = Compared(pairs)
    rounds = any(p.get("round_speedups") for p in pairs)  # as the run's table: how many kept, why no more ran
    lines = [
        "# perflab summary",
        "",
        f"{summary['n_variants_ok']}/{summary['n_variants']} variants ok, "
        f"{summary['n_pairs_verified']}/{summary['n_pairs']} pairs verified; {counts_text(summary)}; "
        f"geomean speedup of verified pairs: {_geomean_text(summary['geomean_speedup_verified'])}, "
        f"wall {summary['wall_s']:.1f} s",
        "",
        f"| example | variant | baseline median {t.name} | optimized median {t.name} |{on.header}"
        f" speedup (interval) | verdict | optimized {rate.name} |" + " rounds |" * rounds,
        f"|---|---|---:|---:|{on.rule}---:|---|---:|" + "---|" * rounds,
    ]
    for p in pairs:
        said = f"{len(p['round_speedups'])} {p.get('rounds_stop') or ''}".strip() if p.get("round_speedups") else None
        said = rounds_text(said, ",".join(map(str, p.get("rounds_left_out") or [])), p["speedup"])
        lines.append(
            f"| {p['chapter']}:{p['example']} | {p['variant']} | {t.text(p['baseline_median_ms'])} | "
            f"{t.text(p['optimized_median_ms'])} |{on.cells(p)} {speedup_text(p, verdict=False)} | {verdict_text(p)} | "
            f"{rate.text(p.get('optimized_achieved_gbps'))} |" + f" {said} |" * rounds
        )
    lines += _energy_section(pairs)
    failures = [v for v in summary["variants"] if v["status"] != "ok"]
    if failures:
        lines += ["", "## Variants not ok", "", "| variant | status | stage | error |", "|---|---|---|---|"]
        for v in failures:
            err = markdown_text(v["error"] or "", 200)
            lines.append(f"| {v['key']} | {v['status']} | {v['failed_stage'] or '—'} | {err} |")
    notes = [p for p in pairs if not p["verified"]]
    if notes:
        lines += ["", "## Verification notes", ""]
        lines += [f"- {p['chapter']}:{p['example']} {p['variant']}: {markdown_text(str(p['verification']), 500)}"
                  for p in notes]  # fmt: skip
    if summary["unpaired_baselines"]:
        lines += ["", "Baselines without an optimized partner: " + ", ".join(summary["unpaired_baselines"])]
    lines += _time_section(summary)
    return "\n".join(lines) + "\n"


def _time_section(summary: dict[str, Any]) -> list[str]:
    """Where the time went: seconds per part, a row per chapter and one for the suite (logging: the suite's)."""
    total = summary.get("stages_s")
    if not total:
        return []
    by_chapter = summary.get("stages_s_by_chapter") or {}
    parts = [p for p in PARTS if p != "logging" and (p not in _OPTIONAL_PARTS or total.get(p, 0.0) >= 0.05)]
    lines = ["", "## Where the time went", "",
             f"Seconds summed over the variants (wall {summary['wall_s']:.1f} s; workers and logging run beside "
             f"each other); logging {total.get('logging', 0.0):.1f} s.", "",
             "| chapter | " + " | ".join(PARTS[p][0] for p in parts) + " |",
             "|---|" + "---:|" * len(parts)]  # fmt: skip
    rows = [*by_chapter.items(), ("all", total)] if len(by_chapter) != 1 else [("all", total)]
    for name, split in rows:
        lines.append(f"| {name} | " + " | ".join(f"{split.get(p, 0.0):.1f}" for p in parts) + " |")
    return lines


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
    """``8 pairs: 5 faster, 1 slower, 1 no interval, 1 mismatch``: every pair under its verdict (only
    ``faster`` is a success), so the counts add up to the pairs."""
    return verdicts_text(summary.get("verdicts") or {}, summary.get("n_pairs", 0))


def verdicts_text(counts: dict[str, int], pairs: int) -> str:
    """``8 pairs: 5 faster, 3 no interval`` from ``{verdict: pairs}`` (in VERDICTS' order); ``0 pairs``."""
    shown = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: _verdict_order(kv[0])) if n)
    return f"{pairs} pair{'' if pairs == 1 else 's'}" + (f": {shown}" if shown else "")


def _verdict_order(verdict: str) -> int:
    return VERDICTS.index(verdict) if verdict in VERDICTS else len(VERDICTS)


class Compared:
    """The columns a Markdown table adds when a pair's speedup is not on the median call time: what it is on and
    the two values it divides (each with its unit); none when every speedup is on the call time."""

    def __init__(self, pairs: list[dict[str, Any]]) -> None:
        self.shown = any(not basis_of(p).is_call for p in pairs if p.get("speedup"))
        self.header = " speedup on | baseline | optimized |" if self.shown else ""
        self.rule = "---|---:|---:|" if self.shown else ""

    def cells(self, pair: dict[str, Any]) -> str:
        if not self.shown:
            return ""
        b = basis_of(pair)
        sides = ("baseline", "optimized")
        # on the cold call, the values are the medians (a pair logged before the values were kept has only those)
        keys = [f"{s}_median_ms" if b.is_call and pair.get(f"{s}_value") is None else f"{s}_value" for s in sides]
        values = (value_text(pair.get(keys[0]), b), value_text(pair.get(keys[1]), b))
        return f" {b.label} | {values[0]} | {values[1]} |" if pair.get("speedup") else " — | — | — |"


def basis_of(pair: dict[str, Any]) -> Basis:
    """What ``pair``'s speedup is on (its ``speedup_metric`` and ``speedup_time``); a metric this version does not
    know reads as itself."""
    try:
        return basis(pair.get("speedup_metric"), pair.get("speedup_time"))
    except ValueError:
        return Basis(str(pair.get("speedup_metric")), str(pair.get("speedup_metric")))


def value_text(value: float | None, b: Basis) -> str:
    """A compared value with its unit: ``350 ms``, ``1210 tokens/s``, ``512 MiB``."""
    if value is None:
        return "—"
    return time_text(value) if b.unit == "ms" else f"{sig(value)} {b.unit}".rstrip()


def speedup_text(pair: dict[str, Any], verdict: bool = True) -> str:
    """``1.73× [1.70, 1.76]`` and (``verdict``) the words "slower" or "no significant difference" when the pair is
    not faster; what it is on is the table's ``speedup on`` column (``Compared``)."""
    if not pair.get("speedup"):
        return "—"
    text = f"{ratio_text(pair['speedup'])}×"
    low, high = pair.get("speedup_ci_low"), pair.get("speedup_ci_high")
    if low is not None and high is not None:
        text += f" [{ratio_text(low)}, {ratio_text(high)}]"
    shown = pair_verdict(pair)
    if verdict and shown in ("slower", "no significant difference"):
        text += f" {verdict_text(pair)}"
    return text


def verdict_text(pair: dict[str, Any]) -> str:
    """``pair_verdict``'s, and where a pair reads "no significant difference" although its interval excludes 1.0,
    why: ``no significant difference (within ±1 % noise threshold)``, or ``(reaching into ±1 % noise threshold)``
    where only one end lies inside the band (the pair's ``noise_threshold``, a config's float or an MLflow param;
    bench.measure.stats.significance)."""
    shown = pair_verdict(pair)
    low, high = pair.get("speedup_ci_low"), pair.get("speedup_ci_high")
    if shown != "no significant difference" or low is None or high is None or low <= 1.0 <= high:
        return shown
    threshold = pair.get("noise_threshold")
    band = f"±{100 * float(threshold):g} % " if threshold else ""
    if threshold and not within_noise(float(low), float(high), float(threshold)):
        return f"{shown} (reaching into {band}noise threshold)"  # past 1.0, one end inside the band
    return f"{shown} (within {band}noise threshold)"


def rounds_text(rounds: str | None, left_out: str | None, speedup: float | None = None) -> str:
    """A pair's rounds as its run printed them, from its tags (``perflab.rounds``, ``perflab.rounds_left_out``): the
    rounds its speedup kept and why no more ran, then those left out: ``8 max_rounds``, ``5 decided, round 1 left
    out: host busy`` (6 ran); ``1`` for one child a side with a speedup, ``—`` for a pair without one (skipped,
    failed)."""
    if not rounds:
        return "1" if speedup else "—"
    left = [x for x in (left_out or "").split(",") if x.strip()]
    out = f", round{'s' * (len(left) > 1)} {', '.join(left)} left out: host busy" if left else ""
    return f"{rounds}{out}"


def pair_verdict(pair: dict[str, Any]) -> str:
    """What a pair shows, in one word or phrase: ``faster`` (verified, ok, the speedup's 95 % interval above 1 and
    its noise threshold), ``slower`` (below), ``no significant difference`` (holding 1, or within the threshold:
    ``verdict_text`` says which); ``no interval`` for a speedup above 1 logged without one, ``no speedup`` for a
    verified pair without one; else the pair's status (``mismatch``, ``unverified``, ``failed``, ``skipped``). Only
    ``faster`` is a success."""
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
