"""What bench's commands share: the common options, targets, one line per variant and a suite's table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from bench.cli.fit import wrapped
from bench.cli.output import console, fitted, name_lines
from bench.define.discovery import Catalog, Example, discover, select
from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.measure.basis import Basis

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
ProfileOpt = Annotated[
    bool | None,
    typer.Option("--profile/--no-profile", help="profile each variant after its timed run, in a separate child"),
]
SanitizeOpt = Annotated[
    bool, typer.Option("--sanitize", help="after each timed run, its calls under compute-sanitizer memcheck, racecheck")
]
ProfileModeOpt = Annotated[
    str | None,
    typer.Option(
        help="torch (default), ncu, nsys, all; memcheck, racecheck, sanitize (a tool not on PATH, or one "
        "for CUDA kernels on a CPU variant: skipped, with why)"
    ),  # fmt: skip
]
NcuPresetOpt = Annotated[str | None, typer.Option(help="Nsight Compute metrics: minimal, roofline or full (slow)")]
DeviceOpt = Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N")]
TimeoutOpt = Annotated[float | None, typer.Option(help="scales every stage limit")]
SmokeOpt = Annotated[bool | None, typer.Option("--smoke/--full-size", help="force smoke or full sizes")]
ExperimentOpt = Annotated[str | None, typer.Option(help="MLflow experiment (default: MLflow's Default)")]
NoTrackOpt = Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")]
RoundsOpt = Annotated[
    int | None,
    typer.Option(
        "--rounds", min=1, max=100,
        help="rounds per pair, fixed (sides alternating; in which children: --round-children); default: at least 3, "
        "then until every pair's interval is within ±2 % or clearly decided, at most 8 (min_rounds, max_rounds)",
    ),
]  # fmt: skip
RoundChildrenOpt = Annotated[
    str | None,
    typer.Option(
        "--round-children",
        help="which children time a pair's later rounds: auto (round 0's, parked between rounds, where a fresh "
        "child would pay 1 s or more again: start-up, set-up, a slow first call), kept (always round 0's), fresh "
        "(a new child per side every round)",
    ),
]
ColdStartOpt = Annotated[
    bool,
    typer.Option(
        "--cold-start",
        help="a brand-new interpreter per variant (cold numbers) instead of a fork of the pre-warmed server",
    ),
]
ColdCompileOpt = Annotated[
    bool,
    typer.Option(
        "--cold-compile",
        help="each child compiles from an empty Inductor/Triton cache (else the caches under ~/.cache/perflab are "
        "kept between variants and runs)",
    ),
]
EnergyOpt = Annotated[
    bool,
    typer.Option(
        "--energy",
        help="also measure each GPU variant's energy per call (NVML's board energy counter over 2 s of back-to-back "
        "calls) and each pair's energy ratio",
    ),
]


def examples_for(targets: list[str] | None, chapters_dir: Path | None) -> tuple[Catalog, list[Example]]:
    catalog = discover(chapters_dir)
    wanted = [t for t in (targets or []) if t.strip().lower() not in ("all", "")]
    return catalog, select(catalog, wanted)


def cli_layer(**flags: Any) -> dict[str, Any]:
    """Only the flags the user gave: unset flags must not override get_config()."""
    return {k: v for k, v in flags.items() if v is not None}


def set_layer(items: list[str] | None) -> dict[str, Any]:
    """``--set FIELD=VALUE`` (repeatable) as a config layer: VALUE read as a YAML scalar (``4``, ``true``, ``null``,
    ``cpu``), checked with the other layers by ``resolve_config``. Raises ConfigError naming a bad item."""
    import difflib

    import yaml

    from bench.define.config import BenchmarkConfig, ConfigError

    out: dict[str, Any] = {}
    for item in items or []:
        field, sep, raw = item.partition("=")
        field = field.strip()
        if not sep or not field:
            raise ConfigError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set max_measure_seconds=4")
        if field not in BenchmarkConfig.model_fields:
            near = difflib.get_close_matches(field, BenchmarkConfig.model_fields, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ConfigError(f"--set {item!r}: no config field {field!r}{hint}; the fields: README, Configuration")
        if field in out:
            raise ConfigError(f"--set {field} given twice: {out[field]!r} and {raw!r}")
        try:
            out[field] = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            out[field] = raw  # the field's own check names it
    return out


def first_line(message: str) -> str:
    """A message's first line that says something, without a terminal's escape codes or control characters (a
    benchmark's exception may carry colours: a CI log off a terminal shows them as ``^[[31m``)."""
    from bench.record.text import plain_text

    return next((t for t in plain_text(message).splitlines() if t.strip()), "")


def line(result: VariantResult, comparison: Comparison | None, prefix: str = "", width: int | None = None) -> Text:
    """One variant's outcome as the console shows it while a suite runs, on one line: status, name (without
    ``prefix``, the chapter of a one-chapter suite), median, and for an optimized variant its speedup and
    the pair's verdict (its interval is in the table; its rounds and why they stopped; a mismatch or an unverified
    pair says why). ``width`` (a terminal's): a line wider than it goes on under the name (``_wrapped_line``);
    None: one line, however long, as a log keeps it."""
    from bench.record.summary import basis_of, pair_verdict
    from bench.record.units import time_text

    colour = {"ok": "green", "skipped": "yellow"}.get(result.status, "red")
    text = Text.assemble((f"{result.status:>7}", colour), " ", result.spec.key.removeprefix(prefix))
    if result.skip_reason:
        text.append(f"  ({result.skip_reason})")
    if result.median_ms is not None:
        text.append(f"  {time_text(result.median_ms)}")
    if result.status != "ok" and result.error:
        text.append(f"  [{result.failed_stage}] {first_line(result.error.message)}")
    if comparison is not None and result.status == "ok":  # a variant not ok said so already
        verdict, b = pair_verdict(comparison.model_dump()), basis_of(comparison.model_dump())
        if comparison.speedup is not None:  # its interval is in the table: the line stays short
            text.append(f"  {ratio(comparison.speedup)}×" + ("" if b.is_call else f" on {b.label}"))
        text.append(f" {verdict}", {"faster": "green", "slower": "red"}.get(verdict, "yellow"))
        if comparison.speedup is None and not b.is_call:  # a memory pair on a CPU: no peak to read, not a time
            text.append(f" on {b.label}")
        rounds = len(comparison.round_speedups or [])
        if rounds > 1:  # the table's rounds column is the first to go in 80 columns
            left = comparison.rounds_left_out  # the rounds the host was busy in: not in the speedup
            said = [f"{rounds} rounds", *([comparison.rounds_stop] if comparison.rounds_stop else [])]
            out = f"; round{'s' * (len(left) > 1)} {', '.join(map(str, left))} left out: host busy" if left else ""
            text.append(f" ({', '.join(said)}{out})")
        if verdict in ("mismatch", "unverified") and comparison.verification.detail:  # why: not only in MLflow
            text.append(f"  ({first_line(comparison.verification.detail)})")
    if result.profile is not None:
        from bench.profile.tools import summary_line

        text.append(f"\n          bound: {summary_line(result.profile)}")
    return text if width is None else _wrapped_line(text, width)


def line_width() -> int | None:
    """The width ``line`` wraps a variant's line at: the console's on a terminal; None off one (a CI log, ``| cat``),
    where a variant is one line, which the README describes and scripts/gpu_session.sh's awk reads."""
    return console.width if console.is_terminal else None


def _wrapped_line(text: Text, width: int) -> Text:
    """``text``'s first line, when wider than ``width``, wrapped between words (``fit.wrapped``: a figure beside its
    unit) onto lines starting under the name (column 8), the status and name kept on the first; each piece keeps
    its style (the status's colour, the verdict's). A terminal wrapped it at its edge, mid-word, at column 0."""
    head = text.plain.split("\n", 1)[0]
    if len(head) <= width:
        return text
    indent = len(head) - len(head.lstrip(" "))
    out, at = Text(), 0
    for n, piece in enumerate(wrapped(head, width, hang=max(8 - indent, 0)).split("\n")):
        body = piece.lstrip(" ") if n else piece
        start = head.find(body, at)
        if start < 0:  # not a piece of the line as it was (whitespace textwrap changed): the line as it is
            return text
        if n:
            out.append("\n" + piece[: len(piece) - len(body)])
        out.append_text(text[start : start + len(body)])
        at = start + len(body)
    return out + text[len(head) :]


def print_line(text: Text) -> None:
    """``line``'s text on the console: its ``bound:`` line, wrapped at the console's width, keeps its indent on
    every line it takes (rich would start them at column 0)."""
    import textwrap

    first, *rest = text.split("\n")
    console.print(first)
    for more in rest:
        wrapped = textwrap.fill(more.plain.strip(), width=max(console.width, 40), initial_indent=" " * 10,
                                subsequent_indent=" " * 10, break_long_words=False, break_on_hyphens=False)  # fmt: skip
        console.print(wrapped, markup=False, soft_wrap=True, highlight=False)


def chapter_prefix(keys: list[str]) -> str:
    """``"ch07:"`` when every key is of one chapter (its table need not repeat it), else ``""``."""
    chapters = {k.split(":", 1)[0] for k in keys}
    return f"{chapters.pop()}:" if len(chapters) == 1 else ""


def table(suite: SuiteResult, width: int | None = None) -> Table:
    """A suite's pairs: medians (one unit for both, named in the header), speedup, its interval, the verdict.
    When a pair's speedup is on another metric than the median call time (the batch time, a generation's TTFT,
    TPOT, ITL or tokens/s: bench.measure.basis), the table names it (``on``) and shows its two values, and the
    median call times move to a column of their own. Names are never cut: a one-chapter suite's drop the chapter
    (named in the title); on a narrow console (``width``, default the console's) the figures keep their width and
    a long name wraps."""
    from bench.record.summary import basis_of, pair_verdict, verdict_text
    from bench.record.units import column

    pairs = suite.comparisons
    noted = []  # the pairs within the noise threshold: a mark in the narrow verdict column, the why below the table
    prefix = chapter_prefix([f"{c.chapter}:{c.example}" for c in pairs])
    unit = column(x for c in pairs for x in (c.baseline_median_ms, c.optimized_median_ms))
    bases = [basis_of(c.model_dump()) for c in pairs]
    other = any(not b.is_call for b, c in zip(bases, pairs, strict=True) if c.speedup is not None)
    rows = []
    for c, b in zip(pairs, bases, strict=True):
        name = f"{c.chapter}:{c.example}".removeprefix(prefix) + ("" if c.variant == "optimized" else f" ({c.variant})")
        low, high = c.speedup_ci_low, c.speedup_ci_high
        medians = [unit.text(c.baseline_median_ms), unit.text(c.optimized_median_ms)]
        verdict, text = pair_verdict(dump := c.model_dump()), verdict_text(dump)
        if text != verdict:
            noted.append(text.removeprefix(verdict).strip(" ()"))
            verdict += "*"
        if other:  # what the speedup is on and the values it divides; the call times in a column of their own
            medians = [*compared_cells(c, b), "→".join(medians)]
        rows.append([
            name, *medians, "—" if c.speedup is None else f"{ratio(c.speedup)}×",
            "—" if low is None or high is None else f"{ratio(low)}–{ratio(high)}",
            f"{len(c.round_speedups)} {c.rounds_stop or ''}".strip() if c.round_speedups else "1", verdict,
        ])  # fmt: skip
    figures = ["on", "baseline → optimized", f"median call {unit.name}"] if other else [
        f"baseline {unit.name}", f"optimized {unit.name}"]  # fmt: skip
    headers = ["pair", *figures, "speedup", "interval", "rounds", "verdict"]
    width = width or console.width
    for least in (88, 72):  # no room for the rounds (the interval carries their spread), then for the interval
        if width < least + 18 * other:  # the verdict says what it shows
            headers.pop(-2)
            rows = [r[:-2] + r[-1:] for r in rows]
    narrow = {i: 7 if figures[i - 1] == "on" else 9 for i in range(1, len(figures) + 1)}
    narrow |= {len(headers) - 2: 8, len(headers) - 1: 14}
    widths = fitted(headers, rows, width, narrow=narrow)
    band = noted[0].removeprefix("within ").removeprefix("reaching into ") if noted else ""
    caption = f"* its interval excludes 1.0 but reaches into the {band}" if noted else None
    out = Table(title=f"{prefix.rstrip(':') or 'perflab'}: baseline vs optimized", box=box.SIMPLE_HEAD,
                show_edge=False, pad_edge=False, title_justify="left", caption=caption,
                caption_justify="left")  # fmt: skip
    for i, header in enumerate(headers):
        left = i == 0 or i == len(headers) - 1 or header == "on"
        out.add_column(header, justify="left" if left else "right", overflow="fold", width=widths[i])
    colour = {"faster": "green", "slower": "red"}
    for name, *cells in rows:
        out.add_row(
            Text(name_lines(name, widths[0])),
            *map(Text, cells[:-1]),
            Text(cells[-1], colour.get(cells[-1].rstrip("*"), "yellow")),
        )
    return out


def compared_cells(c: Comparison, b: Basis) -> list[str]:
    """What ``c``'s speedup is on, with the unit of its values (``TTFT ms``, ``tokens/s``), and those values
    (``350→113``): two cells of a table whose pairs are not all compared on the median call time."""
    from bench.record.units import column, sig

    if c.speedup is None:
        return ["—", "—"]
    values = (c.baseline_value, c.optimized_value)
    if b.is_call and None in values:  # a comparison made before the values were kept: its medians are they
        values = (c.baseline_median_ms, c.optimized_median_ms)
    if None in values:
        return [b.label, "—"]
    if b.unit != "ms":  # tokens/s, MiB: the label says the unit
        return [b.label if b.rate else f"{b.label} {b.unit}", "→".join(sig(v) for v in values)]
    unit = column(values)
    return [f"{b.label} {unit.name}", "→".join(unit.text(v) for v in values)]


def energy_table(suite: SuiteResult, width: int | None = None) -> Table | None:
    """The pairs whose two sides' energy per call was measured (``--energy``): each side's, and how many times
    less the optimized side uses with its 95 % interval; None when no pair has both."""
    from bench.record.units import ENERGY_UNITS, column

    pairs = [c for c in suite.comparisons if c.energy_ratio is not None]
    if not pairs:
        return None
    prefix = chapter_prefix([f"{c.chapter}:{c.example}" for c in suite.comparisons])
    unit = column((x for c in pairs for x in (c.baseline_energy_mj, c.optimized_energy_mj)), ENERGY_UNITS)
    headers = ["pair", f"baseline {unit.name}", f"optimized {unit.name}", "less energy", "95 % interval"]
    rows = []
    for c in pairs:
        name = f"{c.chapter}:{c.example}".removeprefix(prefix) + ("" if c.variant == "optimized" else f" ({c.variant})")
        low, high = c.energy_ratio_ci_low, c.energy_ratio_ci_high
        rows.append([
            name, unit.text(c.baseline_energy_mj), unit.text(c.optimized_energy_mj), f"{ratio(c.energy_ratio or 0)}×",
            "—" if low is None or high is None else f"{ratio(low)}–{ratio(high)}",
        ])  # fmt: skip
    widths = fitted(headers, rows, width or console.width, narrow={1: 9, 2: 9, 3: 7, 4: 9})
    out = Table(title="energy per call (GPU board, back-to-back calls)", box=box.SIMPLE_HEAD, show_edge=False,
                pad_edge=False, title_justify="left")  # fmt: skip
    for i, header in enumerate(headers):
        out.add_column(header, justify="left" if i == 0 else "right", overflow="fold", width=widths[i])
    for name, *cells in rows:
        out.add_row(Text(name_lines(name, widths[0])), *map(Text, cells))
    return out


def ratio(x: float) -> str:
    """A speedup as the tables show it (``bench.record.units.ratio_text``)."""
    from bench.record.units import ratio_text

    return ratio_text(x)


def emit(text: str, report: dict[str, Any], out: Path | None, stem: str) -> None:
    """Print a Markdown report fitted to the console's width (bench.cli.fit: its tables redrawn, its prose wrapped);
    with ``out``, also keep the Markdown and the raw report as <stem>.md / .json, and where the terminal's tables
    differ from the Markdown's, a line names the file."""
    from bench.cli.fit import fit_tables, for_terminal, wrapped

    shown = for_terminal(text, console.width)
    console.print(shown, markup=False, soft_wrap=True, highlight=False)  # cells are data: "[L2 flush]" no style
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{stem}.md").write_text(text)
        (out / f"{stem}.json").write_text(json.dumps(report, indent=2))
        if fit_tables(text, console.width) != text:
            console.print(wrapped(f"the tables as Markdown: {out / f'{stem}.md'}", console.width), markup=False,
                          soft_wrap=True)  # fmt: skip
