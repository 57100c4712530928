"""Commands analysis adds to ``perflab`` (``bench.cli`` PLUGINS): ``peak``, ``readme`` and ``expectations``.

Cheap to import: the heavy modules (torch, mlflow, matplotlib) are imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["register"]

console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)
expectations_app = typer.Typer(no_args_is_help=True, help="Proof of benefit: speedups vs reviewed expectations")

TrackingOpt = Annotated[str | None, typer.Option(help="MLflow tracking URI (default: MLflow's)")]
DirOpt = Annotated[Path, typer.Option("--dir", help="expectations root (one folder per hardware key)")]


def _bad_input(exc: Exception) -> typer.Exit:
    err_console.print(f"[red]error:[/] {escape(str(exc))}")
    return typer.Exit(2)


def peak(
    force: Annotated[bool, typer.Option("--force/--no-force", help="measure again although cached")] = False,
    device: Annotated[str, typer.Option(help="auto (first GPU, else CPU), cpu, cuda")] = "auto",
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log an MLflow run")] = False,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: perflab)")] = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Measure this device's ceilings (copy/L2 bandwidth, matmul TFLOP/s per dtype), cache them per hardware."""
    from analysis.peak import peak as run_peak
    from analysis.peak import peak_markdown
    from bench.peaks import cache_path

    entry, reused = run_peak(force=force, device=device, track=not no_track, experiment=experiment,
                             tracking_uri=tracking_uri)  # fmt: skip
    console.print(peak_markdown(entry))
    where = escape(str(cache_path()))
    if reused:
        console.print(f"reused the cached ceilings of {escape(entry['key'])} from {where} (--force to measure again)")
    else:
        run = f"; MLflow run {entry['run_id']}" if entry.get("run_id") else ""
        console.print(f"cached under {escape(entry['key'])!r} in {where}{run}")


@expectations_app.command("check")
def expectations_check(
    run_id: Annotated[str | None, typer.Option(help="suite parent run id (default: the latest completed one)")] = None,
    tolerance: Annotated[float, typer.Option(help="relative shortfall allowed before 'regressed' (0.05 = 5%)")] = 0.05,
    root: DirOpt = Path("expectations"),
    out: Annotated[Path | None, typer.Option(help="directory for proof_of_benefit.csv (default: .)")] = None,
    no_log: Annotated[bool, typer.Option("--no-log", help="do not attach the CSV to the parent run")] = False,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Write proof_of_benefit.csv (pass / regressed / failed / needs-work per variant); exit 1 on regressed/failed."""
    from analysis.expectations import check, check_csv
    from bench.tracking import log_text_artifacts

    try:
        parent, rows = check(run_id, root, tolerance, tracking_uri)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    text = check_csv(rows)
    out = out or Path(".")
    out.mkdir(parents=True, exist_ok=True)
    (out / "proof_of_benefit.csv").write_text(text)
    if not no_log:
        log_text_artifacts(parent, {"proof_of_benefit.csv": text}, tracking_uri)
    for r in rows:
        speedup = "—" if r.speedup is None else f"{r.speedup:.3f}x"
        expected = "—" if r.expected is None else f"{r.expected:.3f}x"
        console.print(f"{r.status:10} {r.chapter}:{r.example}:{r.variant}  {speedup} (expected {expected})  "
                      + escape(r.notes))  # fmt: skip
    counts = {s: sum(r.status == s for r in rows) for s in ("pass", "regressed", "failed", "needs-work")}
    console.print(f"suite {parent}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                  + f"; wrote {escape(str(out / 'proof_of_benefit.csv'))}")  # fmt: skip
    if counts["regressed"] or counts["failed"]:
        raise typer.Exit(1)


@expectations_app.command("update")
def expectations_update(
    run_id: Annotated[str, typer.Option(help="suite parent run id the expectation comes from")],
    example: Annotated[str, typer.Option("--example", help="one example, chapter:example (ch07:transpose)")],
    root: DirOpt = Path("expectations"),
    tracking_uri: TrackingOpt = None,
) -> None:
    """Record one whole example's expectation from a verified run (review the diff, then commit it)."""
    from analysis.expectations import update

    try:
        path = update(run_id, example, root, tracking_uri)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    console.print(f"wrote {escape(example)} from suite {run_id} into {escape(str(path))}; review and commit it")


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
    tracking_uri: TrackingOpt = None,
) -> None:
    """Rewrite the marked results (and roofline) sections of each chapter's README.md from a suite run."""
    from analysis.readme import update_readmes
    from bench.discovery import default_chapters_dir

    root = chapters_dir or default_chapters_dir()
    try:
        outcomes = update_readmes(run_id, root, tracking_uri, chapter, check)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    for o in outcomes:
        what = f" ({', '.join(o.sections)}) from suite {o.run_id}" if o.sections else ""
        line = f"{o.state:9} {escape(str(o.path))}{what}" + (f": {escape(o.reason)}" if o.reason else "")
        console.print(line, soft_wrap=True)  # a path and its reason on one line, whatever the width
    if all(o.state == "skipped" for o in outcomes):
        err_console.print(f"[red]error:[/] no chapter README under {escape(str(root))} was generated", soft_wrap=True)
        raise typer.Exit(2)
    if check and any(o.state == "differs" for o in outcomes):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("peak")(peak)
    app.command("readme")(readme)
    app.add_typer(expectations_app, name="expectations")
