"""``perflab readme``: the figures in a chapter's README, generated from one suite run in MLflow.

A chapter README holds marked sections that only this module writes::

    <!-- perflab:results:start -->   the pairs: medians, speedup, achieved rate, % of ceiling, #7 target
    <!-- perflab:results:end -->
    <!-- perflab:roofline:start -->  optional: each variant as a roofline point (intensity, rate, bound)
    <!-- perflab:roofline:end -->

``--section N`` writes ``results-N`` / ``roofline-N`` markers instead: pairs run apart (another device, a few pairs
of a chapter) get their own table from their own run beside the chapter's; no section mixes two runs.

The suite is the one named by ``--run-id``, else per chapter the latest completed suite that ran it
(chapter 7 and chapter 1 may have run as two suites). Everything between the markers is
replaced; the rest of the file is left byte for byte. Numbers come from the runs' metrics and tags
only (rows through ``analysis.report``), so a section can be rebuilt from a store copied off the GPU
host, without its artifacts; a number the run did not log is '—'.
The section's first line names the run, its date, device and commit, and the command that wrote it:
a CPU run's figures are labelled as such, never passed off as a GPU's.

The binding ceiling of a variant is the one its ``pct_of_peak`` was logged against
(``perflab.peak_ceiling``; for older runs, recovered by matching the percent against the suite's
ceilings). The chapters' target per pair: ok, verified, speedup ≥ 1.1, and the optimized variant at
≥ 80 % of the copy bandwidth when memory-bound or ≥ 60 % of its dtype's matmul peak when compute-bound, a
collective's bus bandwidth at ≥ 70 % of the measured GPU-GPU link (``p2p_gbps``), or at the share it states of
a ceiling of its own (``get_work()``'s ``ceiling``: PCIe copies, copy engines).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from bench.measure import ceilings as peaks
from bench.record import (
    Compared,
    StoredRun,
    at_median,
    campaign_of,
    latest_suite_run_id,
    read_artifact_text,
    read_run,
    sig,
    speedup_text,
    tagged_runs,
)

__all__ = [
    "SECTIONS",
    "Outcome",
    "Suite",
    "binding",
    "latest_suite_with",
    "load_suite",
    "markers",
    "replace_sections",
    "results_section",
    "roofline_section",
    "roofline_exempt",
    "section_names",
    "stated_ceiling",
    "target_check",
    "update_readmes",
]

SECTIONS = ("results", "roofline")  # marker names; "results" is required in a chapter README
SPEEDUP_TARGET = 1.1  # the chapters' bar: every pair at least this much faster on the GPU
# A pair may read above a ceiling it states by this much (the spread of the two timings) before the ceiling is
# judged wrong: beaten by more, it is not the least time a call can take (the harness's margin on measured ones).
STATED_MARGIN = 1.10
# % of the binding ceiling: copy bandwidth, matmul peak, the measured GPU-GPU link for a collective's busbw
PCT_TARGET = {"copy_gbps": 80.0, "tflops": 60.0, "p2p_gbps": 70.0}
_MATCH_REL = 1e-3  # a logged pct_of_peak "is of" a ceiling when achieved ÷ ceiling agrees this closely


def markers(name: str) -> tuple[str, str]:
    return f"<!-- perflab:{name}:start -->", f"<!-- perflab:{name}:end -->"


@dataclass(frozen=True)
class Suite:
    """One suite as the sections need it: parent run, variant runs, report rows, ceilings, commit."""

    parent: StoredRun
    runs: list[StoredRun]
    rows: dict[str, list[dict[str, Any]]]  # chapter → analysis.report pair rows
    ceilings: dict[str, tuple[dict[str, float], str]]  # hardware key → (ceilings, where they came from)
    commit: str | None


@dataclass(frozen=True)
class Outcome:
    chapter: str
    path: Path
    state: Literal["written", "unchanged", "differs", "skipped"]
    reason: str = ""
    run_id: str | None = None  # the suite the section came (or would come) from
    sections: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ reading


def _ceilings(hardware: str, parent: StoredRun, tracking_uri: str | None) -> tuple[dict[str, float], str] | None:
    """The ceilings of ``hardware``: its latest ``perflab peak`` run in the store started before the
    suite (what the suite's pct_of_peak was computed from), else its latest, else the local cache."""
    found = tagged_runs({"perflab.kind": "peak", "perflab.hardware": hardware}, tracking_uri)
    before = [r for r in found if r.start_time <= parent.start_time]
    if found:
        run = (before or found)[0]
        values = {k: v for k, v in run.metrics.items() if k.endswith(("_gbps", "_tflops"))}
        if values:
            return values, f"MLflow peak run `{run.run_id}`"
    local = peaks.lookup(hardware)
    return (local, "the local peak cache") if local else None


def _commit(parent: StoredRun, runs: list[StoredRun], tracking_uri: str | None) -> str | None:
    """The suite's commit: its tag, MLflow's git tag, else a variant's manifest.json when the artifacts
    are reachable (a store copied off a GPU host usually has none: then the commit is unknown)."""
    t = parent.tags
    commit = t.get("perflab.git_commit") or t.get("mlflow.source.git.commit")
    dirty = t.get("perflab.git_dirty") == "true"
    if not commit and runs:
        try:
            git = json.loads(read_artifact_text(runs[0].run_id, "manifest.json", tracking_uri))["host"]["git"]
            commit, dirty = git.get("commit"), bool(git.get("dirty"))
        except (LookupError, KeyError, TypeError, ValueError):
            return None
    return f"{commit[:12]}{' (dirty tree)' if dirty else ''}" if commit else None


def load_suite(run_id: str | None, tracking_uri: str | None = None) -> Suite:
    """The suite ``run_id`` (default: the latest completed one). ``LookupError`` for an unknown run,
    ``ValueError`` for a run that is not a suite's parent."""
    from analysis.report import build_report

    if not run_id:
        run_id = latest_suite_run_id(tracking_uri)
    parent = read_run(run_id, tracking_uri)
    if parent.is_variant:
        raise ValueError(
            f"run {run_id!r} is the variant run {parent.name!r}; pass its suite's parent run {parent.parent_id!r}"
        )
    parent.check_suite(run_id)
    runs = [r for r in campaign_of(parent, tracking_uri).child_runs(tracking_uri) if r.is_variant]
    if not runs:
        raise ValueError(f"run {run_id!r} ({parent.name!r}) has no benchmark variant runs: it is not a suite")
    report = build_report(parent, runs)
    hardware = sorted({h for r in runs if (h := _hardware(r))})
    ceilings = {h: c for h in hardware if (c := _ceilings(h, parent, tracking_uri))}
    return Suite(parent, runs, report["chapters"], ceilings, _commit(parent, runs, tracking_uri))


def _hardware(run: StoredRun) -> str | None:
    return run.tags.get("perflab.hardware") or run.tags.get("perflab.gpu")


def _ceilings_of(suite: Suite, run: StoredRun) -> dict[str, float] | None:
    found = suite.ceilings.get(_hardware(run) or "")
    return found[0] if found else None


# ------------------------------------------------------------------------------------------ deciding


def binding(
    run: StoredRun, ceilings: dict[str, float] | None, metrics: dict[str, float] | None = None
) -> tuple[float | None, str | None]:
    """(% of the binding ceiling, that ceiling's name); either may be None when the run cannot say. ``metrics``:
    the run's at the median a row shows (``bench.record.at_median``), else its own.

    As logged when the run names its ceiling (``stated``: the benchmark's own, ``stated_ceiling``). A percent
    logged without a name is matched against the ceilings. With no percent logged (no peak cached when it
    ran), one is computed only where the dtype cannot matter: bytes declared and no FLOPs, or an intensity
    left of every matmul ridge.
    """
    m = run.metrics if metrics is None else metrics
    pct, name = m.get("pct_of_peak"), run.tags.get("perflab.peak_ceiling")
    gbps, tflops = m.get("achieved_gbps"), m.get("achieved_tflops")
    if pct is not None and name:
        return pct, name
    if pct is not None:
        if not ceilings:
            return pct, "copy_gbps" if gbps and not tflops else None
        close = []
        for k, c in ceilings.items():
            if k == "p2p_gbps":  # a collective's busbw against the link: logged with its name since it exists
                continue
            achieved = gbps if k.endswith("_gbps") else tflops
            if achieved and c and abs(100.0 * achieved / c - pct) <= _MATCH_REL * pct:
                close.append(k)
        return pct, close[0] if len(close) == 1 else None
    copy = (ceilings or {}).get("copy_gbps")
    if not gbps or not copy or ceilings is None:
        return None, None
    ridges = [v * 1e3 / copy for k, v in ceilings.items() if k.endswith("_tflops") and v]  # FLOP per byte
    if not tflops or (ridges and tflops * 1e3 / gbps < min(ridges)):
        return 100.0 * gbps / copy, "copy_gbps"
    return None, None


def stated_ceiling(run: StoredRun) -> tuple[str, float] | None:
    """The ceiling a benchmark stated (``get_work()``'s ``ceiling``): its name and the % of it the pair targets."""
    name, target = run.tags.get("perflab.ceiling"), run.metrics.get("ceiling_target_pct")
    return (name, target) if name and target is not None else None


def _required(name: str | None, stated: tuple[str, float] | None = None) -> float | None:
    if name == "stated":
        return stated[1] if stated else None
    if name in ("copy_gbps", "p2p_gbps"):
        return PCT_TARGET[name]
    return PCT_TARGET["tflops"] if name and name.endswith("_tflops") else None


def _label(name: str, stated: tuple[str, float] | None = None) -> str:
    """``copy_gbps`` → ``copy``; ``bf16_tflops`` → ``bf16 peak``; ``p2p_gbps`` → ``the GPU-GPU link``;
    ``stated`` → the benchmark's words for it."""
    if name == "stated":
        return stated[0] if stated else "a stated ceiling"
    if name == "p2p_gbps":
        return "the GPU-GPU link"
    return name.removesuffix("_gbps") if name.endswith("_gbps") else name.removesuffix("_tflops") + " peak"


def roofline_exempt(run: StoredRun) -> str | None:
    """Why the device's roofline does not bind this optimized run's number, or None when it does: a wall-clock
    time on a GPU (host work belongs to what is measured) or a speedup on a per-token latency or a rate."""
    metric = run.tags.get("perflab.speedup_metric")
    if metric and metric != "time":
        return f"a {metric} speedup"
    if run.tags.get("perflab.timing_mode") == "cpu" and run.tags.get("perflab.device", "").startswith("cuda"):
        return "a wall-clock time on a GPU"
    return None


def target_check(
    row: dict[str, Any], pct: float | None, name: str | None, exempt: str | None = None,
    stated: tuple[str, float] | None = None,
) -> str:  # fmt: skip
    """``met``, ``not met: <every shortfall>``, or ``—`` with why it cannot be decided. ``exempt``: why the
    roofline does not bind (``roofline_exempt``): then only status, verification and speedup are judged, and
    a pair that passes them is ``met on speedup``. ``stated``: the ceiling the benchmark states and its target
    % (``stated_ceiling``), which ``name`` ``stated`` is judged against."""
    if exempt:
        pct = name = None
    misses = []
    if row["status"] != "ok":
        misses.append(f"pair {row['status']}")
    elif not row["verified"]:
        misses.append("not verified")
    speedup = row["speedup"]
    if speedup is None:
        misses.append("no speedup")
    elif speedup < SPEEDUP_TARGET:
        misses.append(f"speedup {speedup:.2f} < {SPEEDUP_TARGET}")
    elif row.get("significance") not in (None, "faster"):  # None: a run from before speedup intervals
        misses.append(f"speedup interval holds 1.0 ({row['significance']})")
    need = _required(name, stated)
    if pct is not None and name and need is not None and pct < need:
        misses.append(f"{pct:.1f} % of {_label(name, stated)} < {need:.0f} %")
    if pct is not None and name == "stated" and pct > 100.0 * STATED_MARGIN:  # a ceiling beaten is not one
        misses.append(f"{pct:.1f} % of {_label(name, stated)}: above the ceiling the pair states")
    if misses:
        return "not met: " + "; ".join(misses)
    if exempt:
        return f"met on speedup ({exempt}: no roofline)"
    if pct is None:
        return "— (no measured ceiling)"
    if need is None:
        return "— (ceiling unknown)"
    return "met"


# ------------------------------------------------------------------------------------------ writing


def _us(ms: float | None) -> str:
    return sig(None if ms is None else ms * 1e3, 4)


def _achieved(gbps: float | None, tflops: float | None, name: str | None) -> str:
    """The rate the binding ceiling is in; both when the example declares both and the bound is unknown."""
    parts = []
    if gbps is not None and (name in (None, "stated") or name.endswith("_gbps") or tflops is None):
        parts.append(f"{sig(gbps)} GB/s")
    if tflops is not None and (name in (None, "stated") or name.endswith("_tflops") or gbps is None):
        # a CPU's rates are GFLOP/s: "0.00000365 TFLOP/s" reads badly
        parts.append(f"{sig(tflops)} TFLOP/s" if tflops >= 0.1 else f"{sig(tflops * 1e3)} GFLOP/s")
    return ", ".join(parts) or "—"


def _achieved_of(shown: dict[str, float], row: dict[str, Any], name: str | None) -> str:
    """The optimized run's rate (``shown``: its metrics at the row's median) in its binding ceiling's unit: a
    collective's bus bandwidth against the link."""
    busbw = shown.get("busbw_gbps")
    if name == "p2p_gbps" and busbw is not None:
        return f"{sig(busbw)} GB/s busbw"
    return _achieved(row["optimized_gbps"], row["optimized_tflops"], name)


def _pct(pct: float | None, name: str | None, stated: tuple[str, float] | None = None) -> str:
    if pct is None:
        return "—"
    return f"{pct:.1f} % of {_label(name, stated)}" if name else f"{pct:.1f} % (ceiling unknown)"


def _device(runs: list[StoredRun]) -> str:
    gpus = sorted({g for r in runs if (g := r.tags.get("perflab.gpu"))})
    if gpus:
        return ", ".join(gpus)
    cpus = sorted({h for r in runs if (h := r.tags.get("perflab.hardware"))})
    return f"CPU ({', '.join(cpus)})" if cpus else "CPU"


def _versions(runs: list[StoredRun]) -> str:
    parts = []
    for lib in ("torch", "triton"):
        found = sorted({v for r in runs if (v := r.tags.get(f"perflab.{lib}"))})
        if found:
            parts.append(f"{lib} {', '.join(found)}")
    return "; ".join(parts)


def _chapter_targets(targets: str | None, chapter: str) -> str | None:
    """The targets of ``perflab.targets`` ("1,7", "ch1:roofline ch7:bank_conflicts", ...) that name ``chapter``."""
    if not targets:
        return None
    n = int(chapter.removeprefix("ch"))
    names = {str(n), f"ch{n}", f"ch{n:02d}"}
    mine = [t for t in re.split(r"[\s,]+", targets) if t and t.split(":")[0] in names]
    return " ".join(mine) or None


def _ran_on(suite: Suite, runs: list[StoredRun]) -> list[StoredRun]:
    """``runs``, or the suite's where none of them says its device: a chapter whose variants all skipped (two
    GPUs asked of one) ran on the suite's device all the same."""
    described = any(r.tags.get("perflab.gpu") or r.tags.get("perflab.hardware") for r in runs)
    return runs if described else suite.runs


def _header(suite: Suite, runs: list[StoredRun], chapter: str, section: str = "results") -> list[str]:
    p = suite.parent
    date = datetime.fromtimestamp(p.start_time / 1e3, UTC).strftime("%Y-%m-%d %H:%M UTC")
    runs = _ran_on(suite, runs)
    device = _device(runs)
    versions = _versions(runs)
    targets = _chapter_targets(p.tags.get("perflab.targets"), chapter)
    option = "" if section == "results" else f" --section {section}"
    lines = [
        f"Generated by `perflab readme --run-id {p.run_id}{option}` from the suite run `{p.run_id}` "
        f"({p.name or 'unnamed'}{f', targets {targets}' if targets else ''}): {date}, **{device}**"
        f"{f' ({versions})' if versions else ''}, commit {f'`{suite.commit}`' if suite.commit else 'unknown'}. "
        "Do not edit by hand: rerun the command.",
    ]
    if not any(r.tags.get("perflab.gpu") for r in runs):
        lines += ["", "These figures come from a CPU, not a GPU: they show that the pairs run and verify "
                  "(smoke sizes on a CPU); the targets are stated for a data-centre GPU."]  # fmt: skip
    for hw in sorted({h for r in runs if (h := _hardware(r))}):
        found = suite.ceilings.get(hw)
        if found is None:
            lines += ["", f"No measured ceilings of {hw} in the store or the local cache: % of ceiling is what "
                      "the run logged, if anything (`perflab peak` on that device)."]  # fmt: skip
            continue
        ceilings, source = found
        shown = [f"{_label(k)} {sig(v)} {'GB/s' if k.endswith('_gbps') else 'TFLOP/s'}"
                 for k, v in sorted(ceilings.items())]  # fmt: skip
        lines += ["", f"Measured ceilings of {hw} ({source}): {', '.join(shown)}."]
    return lines


def _chapter_runs(suite: Suite, chapter: str) -> list[StoredRun]:
    return [r for r in suite.runs if r.tags.get("perflab.chapter") == chapter]


def results_section(suite: Suite, chapter: str, section: str = "results") -> str:
    """The pairs of ``chapter`` in ``suite`` as the README's results section (Markdown); ``section``: the
    name ``--section`` gave the section (in the command its header repeats)."""
    runs = _chapter_runs(suite, chapter)
    by_id = {r.run_id: r for r in runs}
    rows = suite.rows.get(chapter, [])
    on = Compared(rows)  # a speedup on another metric than the median call: named, with its two values
    lines = _header(suite, runs, chapter, section) + [
        "",
        f"| example | baseline median µs | optimized median µs |{on.header} speedup | verified | achieved "
        "(optimized) | % of measured ceiling | target |",
        f"|---|---:|---:|{on.rule}---:|---|---:|---:|---|",
    ]
    met = on_speedup = 0
    links = False  # a collective held to the measured GPU-GPU link
    for x in rows:
        run = by_id[x["run_id"]]
        # its rates at the median the row shows: the pair's, over the rounds its speedup kept
        shown = at_median(run.metrics, run.metrics.get("pair_optimized_median_ms"))
        pct, name = binding(run, _ceilings_of(suite, run), shown)
        exempt = roofline_exempt(run)
        stated = stated_ceiling(run)
        check = target_check(x, pct, name, exempt, stated)
        if exempt:  # the device's roofline does not bound this number: no % of it shown
            pct = name = None
        links |= name == "p2p_gbps"
        met += check == "met"
        on_speedup += check.startswith("met on speedup")
        label = x["example"] if x["variant"] == "optimized" else f"{x['example']} ({x['variant']})"
        speedup = speedup_text(x)
        verified = "yes" if x["verified"] else f"no ({x['status']})" if x["status"] != "ok" else "no"
        lines.append(
            f"| {label} | {_us(x['baseline_median_ms'])} | {_us(x['optimized_median_ms'])} |{on.cells(x)} {speedup} | "
            f"{verified} | {_achieved_of(shown, x, name)} | {_pct(pct, name, stated)} | "
            f"{check} |"
        )
    if not rows:
        lines.append("| (no pairs of this chapter in the run) | — | — | — | — | — | — | — |")
    lines += [
        "",
        f"{met} of {len(rows)} pair(s) meet the target: ok, verified, speedup ≥ {SPEEDUP_TARGET} with its "
        "interval above 1, and the "
        f"optimized variant at ≥ {PCT_TARGET['copy_gbps']:.0f} % of the measured copy bandwidth when memory-bound "
        f"or ≥ {PCT_TARGET['tflops']:.0f} % of its dtype's measured matmul peak when compute-bound (the binding "
        "ceiling of the roofline, as logged with the run), "
        + (f"a collective's bus bandwidth at ≥ {PCT_TARGET['p2p_gbps']:.0f} % of the measured GPU-GPU link, "
           if links else "")
        + "or at the share the example states of a ceiling the "
        "roofline does not know (PCIe copies: the % column names it). Medians over the run's samples; achieved "
        "rates are the example's declared minimum work ÷ median."
        + (" A speedup on another metric than the median call time (the batch time; a generation's TTFT, TPOT, "
           "ITL, a percentile of one, or tokens/s) names it under `speedup on`, beside the two values it divides."
           if on.shown else "")
        + (f" {on_speedup} more meet it on speedup alone: wall-clock times on a GPU (host work included) and "
           "speedups on a per-token latency or a rate, which the roofline does not bound; the text above "
           "states their ceilings." if on_speedup else ""),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def roofline_section(suite: Suite, chapter: str) -> str:
    """Every variant of ``chapter`` as a roofline point: intensity, achieved rates, what bounds it."""
    runs = sorted(
        _chapter_runs(suite, chapter),
        key=lambda r: (r.tags["perflab.example"], r.tags["perflab.variant"] != "baseline", r.name),
    )
    device = _device(_ran_on(suite, runs))
    lines = [
        f"Measured points of the suite run `{suite.parent.run_id}` on **{device}** "
        "(`perflab readme` writes this table; see the results section for the run).",
    ]
    for hw in sorted({h for r in runs if (h := _hardware(r))}):
        found = suite.ceilings.get(hw)
        if found:
            ceilings = found[0]
            copy = ceilings.get("copy_gbps")
            ridges = [f"{k.removesuffix('_tflops')} {sig(v * 1e3 / copy)} FLOP/B"
                      for k, v in sorted(ceilings.items()) if k.endswith("_tflops") and copy]  # fmt: skip
            if ridges:
                lines += ["", f"Ridge points of {hw} (measured matmul peak ÷ measured copy bandwidth): "
                          + ", ".join(ridges) + "."]  # fmt: skip
    lines += [
        "",
        "| example | variant | median µs | intensity FLOP/B | achieved GB/s | achieved TFLOP/s | bound by | "
        "% of that ceiling |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in runs:
        m = r.metrics
        pct, name = binding(r, _ceilings_of(suite, r))
        kind = ("stated" if name == "stated" else "link" if name == "p2p_gbps"
                else "memory" if name and name.endswith("_gbps") else "compute")  # fmt: skip
        bound = "—" if name is None else f"{kind} ({_label(name, stated_ceiling(r))})"
        if r.tags.get("perflab.bound"):  # the profiler's verdict, when the run was profiled
            bound += f"; profile: {r.tags['perflab.bound']}"
        if "time_median_ms" not in m:
            bound = f"{r.tags.get('perflab.status', '?')}: not measured"
        lines.append(
            f"| {r.tags['perflab.example']} | {r.tags['perflab.variant']} | {_us(m.get('time_median_ms'))} | "
            f"{sig(m.get('arithmetic_intensity'))} | {sig(m.get('achieved_gbps'))} | "
            f"{sig(m.get('achieved_tflops'))} | {bound} | {'—' if pct is None else f'{pct:.1f}'} |"
        )
    return "\n".join(lines) + "\n"


def replace_sections(text: str, bodies: dict[str, str], where: str = "README") -> tuple[str, list[str]]:
    """``text`` with the body between each present pair of markers replaced; (new text, names replaced).

    A marker present without its partner, twice, or out of order is a ``ValueError`` naming ``where``.
    """
    replaced = []
    for name, body in bodies.items():
        start, end = markers(name)
        n_start, n_end = text.count(start), text.count(end)
        if n_start == n_end == 0:
            continue
        i, j = text.find(start), text.find(end)
        if n_start != 1 or n_end != 1 or j < i:
            raise ValueError(
                f"{where}: the {name} section needs exactly one {start} followed by one {end} "
                f"(found {n_start} start and {n_end} end marker(s){', end first' if j < i else ''})"
            )
        text = f"{text[: i + len(start)]}\n{body.rstrip()}\n{text[j:]}"
        replaced.append(name)
    return text, replaced


def latest_suite_with(chapter: str, tracking_uri: str | None = None, examples: set[str] | None = None) -> str | None:
    """The most recent completed suite with variants of ``chapter`` (suites of other chapters, profile
    runs and crashed suites in between are passed over), or None. ``examples``: the chapter's examples on disk; a
    suite that ran an example of that chapter number not among them (another chapters directory's) is passed over."""
    seen, foreign = set(), set()
    runs = tagged_runs({"perflab.chapter": chapter}, tracking_uri, max_results=1000)
    if examples is not None:
        foreign = {r.parent_id for r in runs if r.tags.get("perflab.example") not in examples}
    for run in runs:
        parent = run.parent_id
        if parent and parent not in seen and parent not in foreign:
            seen.add(parent)
            if read_run(parent, tracking_uri).tags.get("perflab.suite_status") == "completed":
                return parent
    return None


def _examples_on_disk(chapter_dir: Path) -> set[str] | None:
    """The examples of a chapter directory (its ``baseline_<name>.py`` files); None where it has none to judge by."""
    names = {p.stem.removeprefix("baseline_") for p in chapter_dir.glob("baseline_*.py")}
    return names or None


def _foreign(suite: Suite, chapter: str, chapter_dir: Path) -> str | None:
    """Why ``suite``'s runs of ``chapter`` are not this README's to show: examples it ran that ``chapter_dir`` does
    not have (a suite of ``perflab run --chapters-dir mine``, whose ``mine/ch01`` is not the repo's ch01)."""
    on_disk = _examples_on_disk(chapter_dir)
    ran = sorted({r.tags.get("perflab.example", "?") for r in _chapter_runs(suite, chapter)})
    alien = [e for e in ran if on_disk is not None and e not in on_disk]
    if not alien:
        return None
    return (
        f"suite {suite.parent.run_id} ran {chapter} examples that {chapter_dir} does not have "
        f"({', '.join(alien)}): another chapters directory's {chapter}; pass the suite of this one"
    )


def _marked_chapters(chapters_dir: Path) -> list[str]:
    start = markers("results")[0]
    return sorted(
        d.name
        for d in chapters_dir.glob("ch*")
        if (d / "README.md").is_file() and start in (d / "README.md").read_text()
    )


def update_readmes(
    run_id: str | None,
    chapters_dir: Path,
    tracking_uri: str | None = None,
    chapters: list[str] | None = None,
    check: bool = False,
    section: str = "results",
) -> list[Outcome]:
    """Regenerate the marked sections of ``<chapters_dir>/<chapter>/README.md``; with ``check``, write
    nothing and report which READMEs differ.

    With ``run_id``: the chapters of that suite (or ``chapters``, which it must have). Without: each
    chapter (``chapters``, else every README with results markers) from the latest completed suite
    that ran it, so chapter 7 and chapter 1, run as two suites, fill both.
    Every README is read and validated before any is written; a chapter without a README, without
    results markers or without a suite is skipped with the reason.

    ``section``: "results" writes the ``results`` and ``roofline`` markers; another name N writes ``results-N``
    and ``roofline-N``, so pairs measured in a run of their own (another device, a subset of a chapter's pairs)
    keep their own table, from their own run, beside the chapter's.
    """
    names = section_names(section)
    wanted = [_chapter_id(c) for c in chapters] if chapters else None
    plan: dict[str, Suite | None] = {}
    if run_id:
        suite = load_suite(run_id, tracking_uri)
        in_run = sorted({r.tags["perflab.chapter"] for r in suite.runs})
        missing = [c for c in wanted or [] if c not in in_run]
        if missing:
            raise ValueError(f"suite {suite.parent.run_id} has no variants of {', '.join(missing)}; it has {in_run}")
        plan = {c: suite for c in wanted or in_run}
    else:
        loaded: dict[str, Suite] = {}
        for chapter in wanted or _marked_chapters(chapters_dir):
            parent = latest_suite_with(chapter, tracking_uri, _examples_on_disk(chapters_dir / chapter))
            if parent is not None and parent not in loaded:
                loaded[parent] = load_suite(parent, tracking_uri)
            plan[chapter] = loaded[parent] if parent else None
    outcomes, writes = [], []
    start, end = markers(names[0])
    for chapter, found in plan.items():
        path = chapters_dir / chapter / "README.md"
        if found is None:
            outcomes.append(Outcome(chapter, path, "skipped", "no completed suite in the store ran this chapter"))
            continue
        run = found.parent.run_id
        if not path.is_file():
            outcomes.append(Outcome(chapter, path, "skipped", "no README.md", run))
            continue
        if why := _foreign(found, chapter, path.parent):
            outcomes.append(Outcome(chapter, path, "skipped", why, run))
            continue
        old = path.read_text()
        if start not in old:
            outcomes.append(Outcome(chapter, path, "skipped", f"no {names[0]} markers ({start} … {end})", run))
            continue
        bodies = {names[0]: results_section(found, chapter, section), names[1]: roofline_section(found, chapter)}
        new, replaced = replace_sections(old, bodies, str(path))
        state: Literal["written", "unchanged", "differs"] = (
            "unchanged" if new == old else "differs" if check else "written"
        )
        outcomes.append(Outcome(chapter, path, state, "", run, replaced))
        if new != old:
            writes.append((path, new))
    if not check:
        for path, new in writes:
            path.write_text(new)
    return outcomes


def section_names(section: str) -> tuple[str, str]:
    """The (results, roofline) marker names of ``--section``: ("results", "roofline"), else ("results-N",
    "roofline-N"); ValueError for a name a marker cannot carry."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", section):
        raise ValueError(f"--section takes lowercase letters, digits and '-' (e.g. hopper), but got {section!r}")
    return ("results", "roofline") if section == "results" else (f"results-{section}", f"roofline-{section}")


def _chapter_id(name: str) -> str:
    """``7``, ``ch7``, ``ch07`` → ``ch07`` (as runs tag chapters)."""
    from bench.define import chapter_id

    digits = name.removeprefix("ch")
    if not digits.isdigit():
        raise ValueError(f"--chapter takes a chapter such as ch07 or 7, but got {name!r}")
    return chapter_id(digits)
