"""Commands analysis adds to ``perflab`` (``perflab/cli.py``): ``compare``, ``report``, ``regressions``, ``peak``,
``readme`` and ``expectations``.

Cheap to import: the heavy modules (torch, mlflow, matplotlib) are imported inside the commands.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from bench.cli import console, error

__all__ = ["register"]

expectations_app = typer.Typer(no_args_is_help=True, help="Proof of benefit: speedups vs reviewed expectations")

TrackingOpt = Annotated[str | None, typer.Option(help="MLflow tracking URI (default: MLflow's)")]
DirOpt = Annotated[Path, typer.Option("--dir", help="expectations root (one folder per hardware key)")]


def say(text: str) -> None:
    """A line of data (paths, names, notes) on one line: never markup, never wrapped by us."""
    console.print(text, markup=False, soft_wrap=True)


def tell(text: str) -> None:
    """A sentence (a count, a note, a verdict's reason): never markup, wrapped between words at the console's width
    (80 columns in a pipe), its later lines indented; a word wider than the line (a path) is never cut."""
    from bench.cli import wrapped

    console.print(wrapped(text, console.width), markup=False, soft_wrap=True)


def _bad_input(exc: Exception) -> typer.Exit:
    error(str(exc))  # one line, never wrapped mid-sentence
    return typer.Exit(2)


def peak(
    force: Annotated[bool, typer.Option("--force/--no-force", help="measure again although cached")] = False,
    device: Annotated[str, typer.Option(help="auto (first GPU, else CPU), cpu, cuda")] = "auto",
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log an MLflow run")] = False,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: MLflow's Default)")] = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Measure this device's ceilings (copy/L2 bandwidth, matmul TFLOP/s per dtype; with two GPUs visible, the
    link between them), cache them per hardware."""
    from analysis.peak import peak as run_peak
    from analysis.peak import peak_markdown
    from bench.measure import ceilings

    entry, reused = run_peak(force=force, device=device, track=not no_track, experiment=experiment,
                             tracking_uri=tracking_uri)  # fmt: skip
    console.print(peak_markdown(entry), markup=False)
    where = ceilings.cache_path()
    if reused:
        say(f"reused the cached ceilings of {entry['key']} from {where} (--force to measure again)")
    else:
        run = f"; MLflow run {entry['run_id']}" if entry.get("run_id") else ""
        say(f"cached under {entry['key']!r} in {where}{run}")


@expectations_app.command("check")
def expectations_check(
    run_id: Annotated[str | None, typer.Option(help="suite parent run id (default: the latest completed one)")] = None,
    tolerance: Annotated[
        float, typer.Option(help="regressed: the run's 95% interval of the speedup below expected x (1 - this)")
    ] = 0.05,
    root: DirOpt = Path("expectations"),
    out: Annotated[
        Path | None, typer.Option(help="directory for proof_of_benefit.csv (default: perflab-results/)")
    ] = None,
    no_log: Annotated[bool, typer.Option("--no-log", help="do not attach the CSV to the parent run")] = False,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Write proof_of_benefit.csv (pass / regressed / failed / skipped / needs-work per variant); exit 1 on
    regressed/failed.

    A speedup is regressed when the run's 95 % interval lies below the expected speedup less the tolerance (without
    a logged interval: its point speedup); a pct_of_peak when it is below the expected one less the tolerance."""
    from analysis.expectations import check, check_csv
    from bench.cli import writable_dir
    from bench.record import log_text_artifacts, results_dir

    out = writable_dir(out, "--out") if out is not None else writable_dir(results_dir(), "--out's default")
    try:
        parent, rows = check(run_id, root, tolerance, tracking_uri)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    _say_campaigns([parent], tracking_uri)
    text = check_csv(rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "proof_of_benefit.csv").write_text(text)
    if not no_log:
        log_text_artifacts(parent, {"proof_of_benefit.csv": text}, tracking_uri)
    for r in rows:
        speedup = "—" if r.speedup is None else f"{r.speedup:.3f}x"
        if r.speedup_ci_low is not None and r.speedup_ci_high is not None:
            speedup += f" [{r.speedup_ci_low:.3f}, {r.speedup_ci_high:.3f}]"
        expected = "—" if r.expected is None else f"{r.expected:.3f}x"
        tell(f"{r.status:10} {r.chapter}:{r.example}:{r.variant}  {speedup} (expected {expected})  {r.notes}")
    counts = {s: sum(r.status == s for r in rows) for s in ("pass", "regressed", "failed", "skipped", "needs-work")}
    tell(f"suite {parent}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    say(f"wrote {out / 'proof_of_benefit.csv'}")
    if counts["regressed"] or counts["failed"]:
        raise typer.Exit(1)


@expectations_app.command("update")
def expectations_update(
    run_id: Annotated[str, typer.Option(help="suite parent run id the expectation comes from")],
    example: Annotated[str, typer.Option("--example", help="one example, chapter:example (ch07:transpose)")],
    root: DirOpt = Path("expectations"),
    tracking_uri: TrackingOpt = None,
) -> None:
    """Record one example's expectation from a verified run: its pairs whose verdict is faster, a line for each
    pair left out (review the diff, then commit it)."""
    from analysis.expectations import update

    try:
        path, skipped = update(run_id, example, root, tracking_uri)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    for line in skipped:
        tell(f"skipped {line}: only a faster pair is recorded")
    say(f"wrote {example} from suite {run_id} into {path}; review and commit it")


def readme(
    run_id: Annotated[
        str | None, typer.Option(help="suite parent run id (default: per chapter, the latest completed suite with it)")
    ] = None,
    chapter: Annotated[
        list[str] | None, typer.Option("--chapter", help="only this chapter (ch07 or 7); repeatable")
    ] = None,
    chapters_dir: Annotated[Path | None, typer.Option(help="chapters root (default: the repo's chapters/)")] = None,
    check: Annotated[
        bool, typer.Option("--check", help="write nothing; exit 1 when a README differs from what the run gives")
    ] = False,
    section: Annotated[
        str,
        typer.Option(help="results (default), or a name N: the results-N / roofline-N markers (pairs run apart)"),
    ] = "results",
    tracking_uri: TrackingOpt = None,
) -> None:
    """Rewrite the marked results (and roofline) sections of each chapter's README.md from a suite run."""
    from analysis.readme import update_readmes
    from bench.define import default_chapters_dir

    root = chapters_dir or default_chapters_dir()
    try:
        outcomes = update_readmes(run_id, root, tracking_uri, chapter, check, section)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    _say_campaigns(sorted({o.run_id for o in outcomes if o.sections and o.run_id}), tracking_uri)
    for o in outcomes:
        what = f" ({', '.join(o.sections)}) from suite {o.run_id}" if o.sections else ""
        say(f"{o.state:9} {o.path}{what}" + (f": {o.reason}" if o.reason else ""))
    if all(o.state == "skipped" for o in outcomes):
        error(f"no chapter README under {root} was generated")
        raise typer.Exit(2)
    if check and any(o.state == "differs" for o in outcomes):
        raise typer.Exit(1)


def compare_cmd(
    run_a: Annotated[str, typer.Argument(help="run id A (the reference): a suite's parent run or a variant run")],
    run_b: Annotated[str, typer.Argument(help="run id B, of the same kind")],
    metrics: Annotated[
        bool, typer.Option("--metrics", help="suites: every metric of every matched variant run (B - A), not pairs")
    ] = False,
    all_metrics: Annotated[
        bool, typer.Option("--all", help="with the metric deltas: also those with no better side")
    ] = False,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Two suites pair by pair: both speedups with their intervals and whether they differ, geomeans over the
    pairs both verified; two variant runs (or suites with --metrics): metric deltas B - A."""
    from analysis.deltas import compare_runs, compare_table
    from analysis.versus import compare_suites, summary_lines, versus_table
    from bench.record import read_run

    try:
        kinds = {read_run(r, tracking_uri).is_variant for r in (run_a, run_b)}
        if kinds == {False} and not metrics and all_metrics:
            raise ValueError("--all adds the metrics with no better side to the metric deltas: with two suites, "
                             "pass --metrics too (two variant runs compare so without it)")  # fmt: skip
        if kinds == {False} and not metrics:
            versus = compare_suites(run_a, run_b, tracking_uri)
            if versus.pairs:
                console.print(versus_table(versus, console.width))
            lines, moved = summary_lines(versus), versus.machines
        else:
            cmp = compare_runs(run_a, run_b, tracking_uri, all_metrics=all_metrics)
            console.print(compare_table(cmp))
            lines = [
                *cmp.campaigns,
                *(
                    f"only in {side}: " + ", ".join(names)
                    for side, names in (("A", cmp.only_a), ("B", cmp.only_b))
                    if names
                ),
                *cmp.notes,
                *(
                    [
                        "better / worse: B beyond ±1 % of A, one reading a side, no interval: a direction, not a "
                        "verdict; a pair's verdict: compare two suites without --metrics; a variant against its "
                        "history: perflab regressions"
                    ]
                    if cmp.deltas
                    else []
                ),
            ]
            moved = cmp.machines
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    if kinds == {False}:
        _say_campaigns([read_run(r, tracking_uri).run_id for r in (run_a, run_b)], tracking_uri, "AB", parts=False)
    for text in [f"different machines, A → B: {m}; those figures include the machines' difference" for m in moved]:
        console.print(text, markup=False)  # wrapped at the console's width (80 in a pipe), between words
    for text in lines:
        console.print(text, markup=False)


def report(
    run_id: Annotated[
        str | None, typer.Option(help="suite parent run id (default: the latest completed suite)")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="directory for the files (default: perflab-results/report-<id>)")
    ] = None,
    no_log: Annotated[bool, typer.Option("--no-log", help="do not attach the files to the parent run")] = False,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Write report.json, report.md and report.csv for a suite and log them on its parent run."""
    from analysis.report import write_report
    from bench.cli import writable_dir
    from bench.record import results_dir

    if out is not None:
        writable_dir(out, "--out")
    else:  # perflab-results/report-<id>: where the run's id is not known yet, its parent
        writable_dir(results_dir(), "--out's default")
    try:
        rep, where = write_report(run_id, out, tracking_uri, log=not no_log)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    from bench.record import cut_short_line, verdicts_text

    o = rep["overall"]
    if o.get("campaign"):
        say(o["campaign"])
    if cut := cut_short_line(o["parent_run_id"], tracking_uri):
        tell(cut)
    gm = o["speedup_geomean"]
    mean = (
        f"geomean speedup of the {o['pairs_counted']} verified ok pair(s) {gm:.3f}×"
        if gm is not None
        else ("no verified ok pair: no geomean speedup")
    )
    tell(f"{o['succeeded']}/{o['variants']} variants ok; {verdicts_text(o['verdicts'], o['pairs'])}; {mean}")
    say(f"wrote {where}" + ("" if no_log else f", logged to run {o['parent_run_id']}"))


def regressions(
    run_id: Annotated[
        str | None, typer.Option(help="suite parent run or variant run (default: the latest completed suite)")
    ] = None,
    k: Annotated[int, typer.Option("-k", help="previous runs compared with (their medians' spread), 2 or more")] = 5,
    threshold: Annotated[float, typer.Option(help="relative median slowdown to flag (0.05 = 5%), 0 or more")] = 0.05,
    alpha: Annotated[
        float, typer.Option(help="significance level of the one-sided test between runs, in (0, 1)")
    ] = 0.01,  # fmt: skip
    tracking_uri: TrackingOpt = None,
) -> None:
    """Each variant vs its previous runs on the same hardware and software; exits 1 on a regression."""
    from analysis.regression import MIN_RUNS, check_suite, regression_notes, regression_table

    # Checked here, not by typer's min=: its message named neither the value given nor, for nan, what is accepted.
    for bad, option, accepted in (
        (k < MIN_RUNS, f"-k {k}", f"{MIN_RUNS} or more previous runs"),
        (not (math.isfinite(threshold) and threshold >= 0), f"--threshold {threshold:g}",
         "a finite number >= 0 (0.05 flags 5 %)"),
        (not 0 < alpha < 1, f"--alpha {alpha:g}", "a number strictly between 0 and 1 (e.g. 0.01)"),
    ):  # fmt: skip
        if bad:
            error(f"{option}: accepted: {accepted}")
            raise typer.Exit(2)
    try:
        checked, rows = check_suite(run_id, k=k, threshold=threshold, alpha=alpha, tracking_uri=tracking_uri)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    _say_campaigns([checked], tracking_uri)
    console.print(regression_table(rows, console.width))
    for note in regression_notes(rows):
        tell(note)
    verdicts = ("regressed", "improved", "ok", "not-significant", "no-history", "not-measured")
    counts = {s: sum(r.status == s for r in rows) for s in verdicts}
    tell(f"run {checked}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    if counts["regressed"]:
        raise typer.Exit(1)


def _say_campaigns(run_ids: list[str], tracking_uri: str | None, sides: str = "", parts: bool = True) -> None:
    """For a suite run in parts (``--shard I/N``): the parts read, and those missing (``parts``); for a suite
    stopped before all its variants ran: so, and which did not. ``sides``: a label per run (compare's ``AB``)."""
    from bench.record import campaign_line, cut_short_line

    for i, run_id in enumerate(run_ids):
        label = f"{sides[i]}: " if sides else ""
        if parts and (line := campaign_line(run_id, tracking_uri)):
            say(label + line)
        if line := cut_short_line(run_id, tracking_uri):
            tell(label + line)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)
    app.command()(report)
    app.command()(regressions)
    app.command("peak")(peak)
    app.command("readme")(readme)
    app.add_typer(expectations_app, name="expectations")
