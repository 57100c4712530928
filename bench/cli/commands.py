"""``perflab list``, ``verify``, ``profile``, ``show`` and ``server status|stop``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from bench.cli.common import (
    ChaptersOpt,
    DeviceOpt,
    ExperimentOpt,
    NcuPresetOpt,
    NoTrackOpt,
    ProfileModeOpt,
    SmokeOpt,
    TargetsOpt,
    TimeoutOpt,
    cli_layer,
    console,
    examples_for,
    line,
    line_width,
    print_line,
)
from bench.cli.fit import wrapped
from bench.cli.workers import check_device
from bench.define.config import resolve_config
from bench.errors import PerflabError
from bench.isolate.suite import expected_note

server_app = typer.Typer(
    no_args_is_help=True, help="The pre-warmed servers variants are forked from (kept between runs)"
)


def list_(targets: TargetsOpt = None, chapters_dir: ChaptersOpt = None) -> None:
    """List chapters, examples and their variants, and the directory they were found in."""
    from rich import box

    catalog, examples = examples_for(targets, chapters_dir)
    given = f" (--chapters-dir {chapters_dir})" if chapters_dir is not None and str(chapters_dir) != str(
        catalog.root) else ""  # fmt: skip
    if not catalog.examples:
        raise PerflabError(f"no example under {catalog.root}{given}: {_holds(catalog.root)}")
    variants = sum(len(e.variants) for e in examples)
    # a line of its own, not the table's title: a title wraps at the table's width, a path mid-word
    console.print(f"{len(examples)} example(s), {variants} variant(s) under {catalog.root}{given}", markup=False,
                  soft_wrap=True)  # fmt: skip
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    last = _last_times()
    took = [_took(e, last) for e in examples]
    timed = any(took)
    for col in ("target", "variants", "last run s", "note") if timed else ("target", "variants", "note"):
        out.add_column(col, overflow="fold", justify="right" if col == "last run s" else "left")
    for e, t in zip(examples, took, strict=True):  # names are data: Text, never markup
        out.add_row(Text(e.target), Text(", ".join(v.variant for v in e.variants)), *([t] if timed else []),
                    "" if e.optimized else "no optimized partner")  # fmt: skip
    console.print(out)
    note = expected_note(examples, last)
    if note:  # the plain command's durations (bench.cli.run: this device's default, sizes as chosen, no cold start)
        console.print(f"{note} (`perflab run` without flags)", markup=False, soft_wrap=True)
    for orphan in catalog.orphans:
        console.print(Text.assemble(("optimized file without baseline:", "yellow"), f" {orphan}"))


def _last_times() -> dict[str, float]:
    """Each variant's time in the last plain ``perflab run`` here (its durations: bench.cli.run)."""
    from bench.cli.run import durations_path, durations_signature
    from bench.isolate.suite import load_durations

    try:
        return load_durations(durations_path(), durations_signature(resolve_config()))
    except PerflabError:  # a bad $PERFLAB_ROUNDS: the listing does not need it
        return {}


def _took(example: Any, last: dict[str, float]) -> str:
    """An example's seconds in the last plain run, its variants' summed; "" where one of them has none."""
    times = [last.get(v.key) for v in example.variants]
    return "" if None in times else f"{sum(t for t in times if t is not None):.1f}"


def _holds(root: Path) -> str:
    """What a chapters directory without examples holds instead, and what it needs: ``chNN/`` directories of
    ``baseline_<name>.py`` and ``optimized_<name>.py`` files."""
    need = "a chapter is a chNN/ directory (ch01, ch7) of baseline_<name>.py and optimized_<name>.py files"
    files = sorted(p.name for p in root.glob("*.py"))
    dirs = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    held = [f"{len(files)} Python file(s) ({', '.join(files[:4])}{', ...' if len(files) > 4 else ''})"] if files else []
    held += [f"the directories {', '.join(dirs[:6])}{', ...' if len(dirs) > 6 else ''}"] if dirs else []
    return f"it holds {' and '.join(held) or 'nothing'}; {need}"


def verify(
    targets: TargetsOpt = None, chapters_dir: ChaptersOpt = None, device: DeviceOpt = None,
    timeout_multiplier: TimeoutOpt = None,
) -> None:  # fmt: skip
    """Import, instantiate and set up each benchmark in isolation, without timing."""
    from bench.isolate.runner import run_variant

    layer = cli_layer(device=device, timeout_multiplier=timeout_multiplier)
    check_device(resolve_config(layer).device)  # a GPU this host lacks: one line, not a failure per variant
    _, examples = examples_for(targets, chapters_dir)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="perflab-verify-") as tmp:
        for e in examples:
            for spec in e.variants:
                result = run_variant(spec, Path(tmp) / spec.key.replace(":", "_"), cli_layer=layer, mode="verify")
                failed += result.status != "ok"
                console.print(line(result, None, width=line_width()), soft_wrap=True)  # as `perflab run`'s
    if failed:
        raise typer.Exit(1)


def profile(
    targets: Annotated[list[str], typer.Argument(help="ch7:<example>, ch7, ...: every variant of each is profiled")],
    profile_mode: ProfileModeOpt = None, ncu_preset: NcuPresetOpt = None, device: DeviceOpt = None,
    timeout_multiplier: TimeoutOpt = None, smoke: SmokeOpt = None, experiment: ExperimentOpt = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI")] = None,
    no_track: NoTrackOpt = False, chapters_dir: ChaptersOpt = None,
    keep_workdir: Annotated[Path | None, typer.Option(help="keep profiles and logs in this directory")] = None,
) -> None:  # fmt: skip
    """Profile the variants of examples without timing them (torch.profiler, ncu, nsys) and log the profiles."""
    from bench.isolate.profiled import profile_variant

    layer = cli_layer(
        enable_profiling=True, profile_mode=profile_mode, ncu_preset=ncu_preset, device=device,
        timeout_multiplier=timeout_multiplier, smoke=smoke,
    )  # fmt: skip
    check_device(resolve_config(layer).device)
    _, examples = examples_for(targets, chapters_dir)
    tracker = None if no_track else _profile_tracker(experiment, tracking_uri, ",".join(targets))
    root = keep_workdir or Path(tempfile.mkdtemp(prefix="perflab-profile-"))
    failed = 0
    try:
        for spec in [spec for e in examples for spec in e.variants]:
            result = profile_variant(spec, root / spec.chapter / spec.example / spec.variant, cli_layer=layer)
            failed += result.status not in ("ok", "skipped")
            if tracker is not None:
                tracker.log_variant(result)
            print_line(line(result, None))
    finally:
        if tracker is not None:
            tracker.__exit__(None, None, None)  # FINISHED, and no suite_status: not a suite
        if keep_workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    if tracker is not None:
        console.print(f"MLflow parent run {tracker.parent_run_id}")
    if failed:
        raise typer.Exit(1)


def _profile_tracker(experiment: str | None, tracking_uri: str | None, targets: str) -> Any:
    from bench.record.manifest import host_manifest
    from bench.record.tracking import Tracker

    tracker = Tracker(
        experiment=experiment, tracking_uri=tracking_uri, run_name=f"perflab profile {targets}",
        host_manifest=host_manifest(), tags={"perflab.kind": "profile", "perflab.targets": targets},
    )  # fmt: skip
    tracker.start()
    return tracker


def show(
    run_id: Annotated[
        str | None,
        typer.Option(help="parent run id (default: the latest completed suite, or one --suite-timeout ended)"),
    ] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI")] = None,
) -> None:
    """Print a suite's pairs as a Markdown table, straight from the MLflow store."""
    from bench.record.campaign import campaign_of, cut_short_line
    from bench.record.store import read_run, suite_runs

    try:
        if run_id is not None:
            run = read_run(run_id, tracking_uri)
            if run.is_variant:
                raise LookupError(f"run {run_id!r} is the variant run {run.name!r}; pass its suite's parent run "
                                  f"{run.parent_id!r}")  # fmt: skip
            run.check_suite(run_id)
            run_id = run.run_id  # the whole id of a prefix given
        parent, runs = suite_runs(run_id, tracking_uri)
        parent_run = read_run(parent, tracking_uri)
        campaign = campaign_of(parent_run, tracking_uri)  # a suite in parts: every part's variants
        for part in campaign.parents.values():
            runs += suite_runs(part.run_id, tracking_uri)[1] if part.run_id != parent else []
    except (LookupError, ValueError) as exc:
        raise PerflabError(str(exc)) from None
    if not runs:
        raise PerflabError(f"run {parent!r} has no variant runs: not a perflab suite")
    if line := campaign.line():
        print(line)
    if line := cut_short_line(parent, tracking_uri):
        print(line)
    print(pairs_markdown(parent, runs))


def pairs_markdown(parent: str, runs: list[Any]) -> str:
    """One row per optimized variant, numbers read from the runs' metrics and tags (never typed); each column's
    unit chosen from its values and named in its header."""
    from bench.record.pairs import pair_baseline
    from bench.record.summary import Compared, basis_of, rounds_text, speedup_text, verdict_text
    from bench.record.units import RATE_UNITS, column

    by_name = {r.info.run_name: r for r in runs}
    gpus = sorted(
        {
            r.data.tags.get("perflab.gpu") or r.data.tags.get("perflab.device", "?")
            for r in runs
            if r.data.tags.get("perflab.status") != "skipped"
        }
    )  # a skipped variant ran nowhere ("auto")
    rows = []
    for _, run in sorted(by_name.items()):
        tags, metrics = run.data.tags, run.data.metrics
        if tags.get("perflab.variant", "baseline") == "baseline":
            continue
        base = by_name.get(f"{tags['perflab.chapter']}:{tags['perflab.example']}:baseline")
        pair = {"status": tags.get("perflab.pair_status") or tags.get("perflab.status"),
                "speedup": metrics.get("speedup"), "speedup_ci_low": metrics.get("speedup_ci_low"),
                "speedup_ci_high": metrics.get("speedup_ci_high"), "significance": tags.get("perflab.significance"),
                "speedup_time": tags.get("perflab.speedup_time"),
                "speedup_metric": tags.get("perflab.speedup_metric"),
                "noise_threshold": run.data.params.get("noise_threshold")}  # fmt: skip
        held = basis_of(pair).metric  # the metric both sides' runs hold the compared value under
        b = pair_baseline(metrics, base.data.metrics if base is not None else {}, held)
        metrics = pair_baseline(metrics, metrics, held, "optimized")  # over the rounds its speedup was taken over
        pair.update(baseline_value=b.get(held), optimized_value=metrics.get(held))
        pair["rounds"] = rounds_text(tags.get("perflab.rounds"), tags.get("perflab.rounds_left_out"), pair["speedup"])
        rows.append((tags, metrics, b, pair))
    t = column(x for _, m, b, _ in rows for x in (b.get("time_median_ms"), m.get("time_median_ms")))
    rate = column((x for _, m, b, _ in rows for x in (b.get("achieved_gbps"), m.get("achieved_gbps"))), RATE_UNITS)
    on = Compared([pair for *_, pair in rows])
    rounds = any("perflab.rounds" in tags for tags, *_ in rows)  # as the run's table: how many kept, why no more ran
    lines = [
        f"MLflow parent run `{parent}`; device(s): {', '.join(gpus) or '—'}",
        "",
        f"| example | variant | baseline median {t.name} | optimized median {t.name} |{on.header} speedup (interval) "
        f"| verdict | verified | baseline {rate.name} | optimized {rate.name} | optimized CV |{' rounds |' * rounds}",
        f"|---|---|---:|---:|{on.rule}---:|---|---|---:|---:|---:|{'---|' * rounds}",
    ]
    for tags, m, b, pair in rows:
        cv = m.get("time_cv")
        lines.append(
            f"| {tags['perflab.chapter']}:{tags['perflab.example']} | {tags['perflab.variant']} | "
            f"{t.text(b.get('time_median_ms'))} | {t.text(m.get('time_median_ms'))} |{on.cells(pair)} "
            f"{speedup_text(pair, verdict=False)} | {verdict_text(pair)} | {tags.get('perflab.verified', 'false')} | "
            f"{rate.text(b.get('achieved_gbps'))} | {rate.text(m.get('achieved_gbps'))} | "
            f"{'—' if cv is None else f'{100 * cv:.2f} %'} |" + (f" {pair['rounds']} |" if rounds else "")
        )
    return "\n".join(lines + _energy_lines(rows))


def _energy_lines(rows: list[tuple[Any, Any, Any, Any]]) -> list[str]:
    """The pairs whose runs carry ``energy_ratio`` (``--energy``): each side's energy per call and power, the ratio."""
    from bench.record.units import ENERGY_UNITS, column

    measured = [(t, m, b) for t, m, b, _ in rows if m.get("energy_ratio") is not None]
    if not measured:
        return []
    e = column((x for _, m, b in measured for x in (b.get("energy_per_call_mj"), m.get("energy_per_call_mj"))),
               ENERGY_UNITS)  # fmt: skip
    lines = ["", "Energy per call (GPU board, back-to-back calls):", "",
             f"| example | variant | baseline {e.name} | optimized {e.name} | less energy (95 % interval) | "
             "baseline W | optimized W |", "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for tags, m, b in measured:
        low, high = m.get("energy_ratio_ci_low"), m.get("energy_ratio_ci_high")
        interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        watts = [f"{x:.0f}" if x is not None else "—" for x in (b.get("energy_power_w"), m.get("energy_power_w"))]
        lines.append(
            f"| {tags['perflab.chapter']}:{tags['perflab.example']} | {tags['perflab.variant']} | "
            f"{e.text(b.get('energy_per_call_mj'))} | {e.text(m.get('energy_per_call_mj'))} | "
            f"{m['energy_ratio']:.2f}×{interval} | {watts[0]} | {watts[1]} |"
        )
    return lines


def _say(text: str) -> None:
    """A server command's line, wrapped between words at the console's width, the lines after the first indented
    (``fit.wrapped``): rich broke it where it reached the edge ("up" / "12345 s", a pid), going on at column 0."""
    console.print(wrapped(text, console.width), markup=False, soft_wrap=True, highlight=False)


@server_app.command("status")
def server_status() -> None:
    """List this user's servers: pid, Triton mode, uptime, children running; "this checkout's" marks those
    `perflab server stop` stops without --all."""
    from bench.isolate import server

    found = server.servers()
    if not found:
        _say(f"no server running (socket directory {server.runtime_dir()})")
    own = server.own_keys()
    for s in found:
        name = f"server {s['pid']} key {s['key']}" + (" (this checkout's)" if s["key"] in own else "")
        if s.get("starting"):
            _say(f"{name}: starting (importing torch)")
            continue
        failed = "; ".join(f"{module} ({why})" for module, why in (s["preload_errors"] or {}).items())
        errors = f", preload errors: {failed}" if failed else ""
        _say(f"{name}: TRITON_INTERPRET={s['triton_interpret']!r}, up {s['uptime_s']:.0f} s, {s['children']} "
             f"child(ren), exits after {s['idle_limit_s']:.0f} s idle{errors}")  # fmt: skip


@server_app.command("stop")
def server_stop(
    every: Annotated[bool, typer.Option("--all", help="every server of this user, other checkouts' too")] = False,
) -> None:
    """Stop this checkout's servers (their running children are killed); the next run starts a fresh one."""
    from bench.isolate import server

    pids = server.stop_all(keys=None if every else server.own_keys())
    _say(f"stopped {len(pids)} server(s)" + (f": {', '.join(map(str, pids))}" if pids else ""))
    others = [] if every else [s["pid"] for s in server.servers(timeout=0.5)]
    if others:
        _say(f"left running: {len(others)} server(s) of other checkouts or environments "
             f"({', '.join(map(str, others))}); --all stops them too")  # fmt: skip
