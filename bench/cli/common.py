"""What bench's commands share: the consoles, the common options, targets, and one line per variant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.define.discovery import Catalog, Example, discover, select
from bench.define.result import Comparison, SuiteResult, VariantResult

# No emoji codes: a key like "ch07:x:baseline" would print as "ch07❌baseline". Text from names,
# paths and messages is escaped so "[setup]" is printed, not swallowed as a markup tag.
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)

TargetsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--targets",
        "-t",
        help="ch7, 7, ch07, ch7:<example>; repeat or separate by commas/spaces; 'all' or none = everything",
    ),
]
ChaptersOpt = Annotated[
    Path | None, typer.Option("--chapters-dir", help="chapters root (default: ./chapters beside bench/)")
]
ProfileModeOpt = Annotated[
    str | None, typer.Option(help="torch, ncu, nsys or all (a tool not on PATH is skipped with the reason)")
]
NcuPresetOpt = Annotated[str | None, typer.Option(help="Nsight Compute metrics: minimal, roofline or full (slow)")]
DeviceOpt = Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N")]
TimeoutOpt = Annotated[float | None, typer.Option(help="scales every stage limit")]
SmokeOpt = Annotated[bool | None, typer.Option("--smoke/--full-size", help="force smoke or full sizes")]
ExperimentOpt = Annotated[str | None, typer.Option(help="MLflow experiment (default: perflab)")]
NoTrackOpt = Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")]


def examples_for(targets: list[str] | None, chapters_dir: Path | None) -> tuple[Catalog, list[Example]]:
    catalog = discover(chapters_dir)
    wanted = [t for t in (targets or []) if t.strip().lower() not in ("all", "")]
    return catalog, select(catalog, wanted)


def cli_layer(**flags: Any) -> dict[str, Any]:
    """Only the flags the user gave: unset flags must not override get_config()."""
    return {k: v for k, v in flags.items() if v is not None}


def line(result: VariantResult, comparison: Comparison | None) -> str:
    """One variant's outcome as the console shows it while a suite runs."""
    colour = {"ok": "green", "skipped": "yellow"}.get(result.status, "red")
    text = f"[{colour}]{result.status:>7}[/] {escape(result.spec.key)}"
    if result.skip_reason:
        text += escape(f"  ({result.skip_reason})")
    if result.median_ms is not None:
        text += f"  median {result.median_ms:.4f} ms"
    if result.status != "ok" and result.error:
        text += escape(f"  [{result.failed_stage}] {result.error.message.splitlines()[0][:120]}")
    if comparison is not None and comparison.speedup is not None:
        from bench.record.summary import speedup_text

        text += "  speedup " + escape(speedup_text(comparison.model_dump()))
    if comparison is not None:
        text += "  verified" if comparison.verification.verified else f"  NOT verified ({comparison.status})"
    if result.profile is not None:
        from bench.profile.tools import summary_line

        text += escape(f"\n          bound: {summary_line(result.profile)}")
    return text


def table(suite: SuiteResult) -> Table:
    """A suite's pairs: medians, speedup, verified, status."""
    from bench.record.summary import speedup_text

    out = Table(title="perflab results")
    for col in ("example", "variant", "baseline ms", "optimized ms", "speedup", "verified", "status"):
        out.add_column(col, justify="right" if "ms" in col or col == "speedup" else "left")
    for c in suite.comparisons:
        out.add_row(
            f"{c.chapter}:{c.example}",
            c.variant,
            f"{c.baseline_median_ms:.4f}" if c.baseline_median_ms is not None else "—",
            f"{c.optimized_median_ms:.4f}" if c.optimized_median_ms is not None else "—",
            speedup_text(c.model_dump()),
            "yes" if c.verification.verified else "no",
            c.status,
        )
    return out


def emit(text: str, report: dict[str, Any], out: Path | None, stem: str) -> None:
    """Print a Markdown table; with ``out``, also keep it and the raw report as <stem>.md / .json."""
    console.print(text, markup=False)  # table cells are data: "[L2 flush]" is not a style
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{stem}.md").write_text(text)
        (out / f"{stem}.json").write_text(json.dumps(report, indent=2))
