"""The ``perflab`` command: run, list, verify, show; compare, report, regressions (from ``analysis``)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.config import load_config_file, resolve_config
from bench.discovery import Catalog, Example, discover, select
from bench.errors import PerflabError
from bench.result import Comparison, SuiteResult, VariantResult

if TYPE_CHECKING:
    from bench.tracking import Tracker

app = typer.Typer(add_completion=False, no_args_is_help=True, help="perflab: honest baseline vs optimized benchmarks")
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


def _examples(targets: list[str] | None, chapters_dir: Path | None) -> tuple[Catalog, list[Example]]:
    catalog = discover(chapters_dir)
    wanted = [t for t in (targets or []) if t.strip().lower() not in ("all", "")]
    return catalog, select(catalog, wanted)


def _cli_layer(**flags: Any) -> dict[str, Any]:
    """Only the flags the user gave: unset flags must not override get_config()."""
    return {k: v for k, v in flags.items() if v is not None}


@app.command()
def run(
    targets: TargetsOpt = None,
    iterations: Annotated[int | None, typer.Option(help="timed calls per variant")] = None,
    warmup: Annotated[int | None, typer.Option(help="untimed calls before measurement")] = None,
    seed: Annotated[int | None, typer.Option(help="seed for random/numpy/torch/CUDA")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N")] = None,
    timeout_multiplier: Annotated[float | None, typer.Option(help="scales every stage limit")] = None,
    reproducible: Annotated[bool, typer.Option("--reproducible", help="deterministic algorithms")] = False,
    cold_start: Annotated[
        bool,
        typer.Option(
            "--cold-start",
            help="a brand-new interpreter per variant (cold numbers) instead of a fork of the pre-warmed server",
        ),
    ] = False,
    profile: Annotated[
        bool | None,
        typer.Option("--profile/--no-profile", help="profile each variant after its timed run, in a separate child"),
    ] = None,
    profile_mode: ProfileModeOpt = None,
    ncu_preset: NcuPresetOpt = None,
    smoke: Annotated[bool | None, typer.Option("--smoke/--full-size", help="force smoke or full sizes")] = None,
    warm_cache: Annotated[bool, typer.Option("--warm-cache", help="do not flush L2 before GPU samples")] = False,
    timing_mode: Annotated[
        str | None, typer.Option(help="auto, cpu, cuda_event, cuda_graph, triton, pytorch (see bench/timing.py)")
    ] = None,
    noise_target: Annotated[
        float | None, typer.Option(help="adaptive sampling stops at this relative standard error (0.005)")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="suite config file (.yaml/.json/.toml)")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: perflab)")] = None,
    tracking_uri: Annotated[
        str | None, typer.Option(help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or MLflow's default)")
    ] = None,
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")] = False,
    chapters_dir: ChaptersOpt = None,
    keep_workdir: Annotated[Path | None, typer.Option(help="keep child outputs/logs in this directory")] = None,
    gpus: Annotated[
        str | None, typer.Option(help="GPU indices, e.g. 0,1: one worker per GPU (default: every visible GPU)")
    ] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="parallel workers for CPU-only runs")] = None,
    overlap: Annotated[
        bool,
        typer.Option(
            "--overlap/--no-overlap",
            envvar="PERFLAB_OVERLAP",
            help="start each variant's child (start-up, CUDA context) while the previous one on its GPU checks "
            "its outputs and exits; held before setup() until that child is gone (never during a measurement)",
        ),
    ] = True,
    split_pairs: Annotated[
        bool,
        typer.Option(
            "--split-pairs",
            envvar="PERFLAB_SPLIT_PAIRS",
            help="with several GPUs (of one model), run an example that would alone outlast the others' share "
            "as separate variants, its baseline and optimized side by side on two GPUs (its speedup is then "
            "across GPUs, and marked so); default: every pair on one GPU",
        ),
    ] = False,
) -> None:
    """Measure baseline and optimized variants, verify outputs, log every variant to MLflow."""
    suite_layer = load_config_file(config) if config else None
    cli_layer = _cli_layer(
        iterations=iterations,
        warmup=warmup,
        seed=seed,
        device=device,
        timeout_multiplier=timeout_multiplier,
        deterministic=True if reproducible else None,
        enable_profiling=True if profile is None and profile_mode is not None else profile,
        profile_mode=profile_mode,
        ncu_preset=ncu_preset,
        smoke=smoke,
        flush_l2=False if warm_cache else None,
        timing_mode=timing_mode,
        noise_target=noise_target,
    )
    effective = resolve_config(suite_layer, cli_layer)  # reject bad flags before anything starts
    catalog, examples = _examples(targets, chapters_dir)
    for orphan in catalog.orphans:
        err_console.print(f"[yellow]warning:[/] {escape(orphan)} has no baseline_ partner; skipped")
    if not examples:
        raise PerflabError(f"no examples found under {catalog.root}")
    _check_workers(gpus, jobs)
    n_variants = sum(len(e.variants) for e in examples)
    if not cold_start:
        from bench.runner import prestart_server

        # First: the server's imports (torch) overlap everything below, the MLflow start-up included.
        prestart_server(effective)
    workers = _workers(effective.device, gpus, jobs)
    from bench.suite import BackgroundSink, load_durations, run_suite, save_durations

    durations = _durations_path()
    signature = f"device={effective.device} smoke={effective.smoke} cold_start={cold_start}"

    sink = None
    if not no_track:
        target_text = ",".join(targets or ["all"])

        def open_tracker() -> Tracker:
            from bench.manifest import host_manifest
            from bench.tracking import Tracker

            tracker = Tracker(
                experiment=experiment,
                tracking_uri=tracking_uri,
                run_name=f"perflab run {target_text}",
                host_manifest=host_manifest(),
                tags={"perflab.targets": target_text, "perflab.cold_start": str(cold_start).lower()},
            )
            tracker.start()
            return tracker

        # MLflow opens (import + store: ~10 s on a GPU host) while the first variants run.
        sink = BackgroundSink(open_tracker)

    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console, transient=False,
    ) as progress:  # fmt: skip
        task = progress.add_task("running", total=n_variants)

        def on_result(result: VariantResult, comparison: Comparison | None) -> None:
            progress.console.print(_line(result, comparison))
            progress.advance(task)

        before_s = _process_age_s()  # interpreter start, imports, discovery, server and MLflow threads started
        try:
            suite = run_suite(
                examples,
                suite_layer=suite_layer,
                cli_layer=cli_layer,
                sink=sink,
                on_result=on_result,
                workdir=keep_workdir,
                keep_workdir=keep_workdir is not None,
                cold_start=cold_start,
                workers=workers,
                expected_s=load_durations(durations, signature) if len(workers) > 1 else None,
                overlap=overlap,
                split_pairs=split_pairs,
            )
        except BaseException:
            if sink is not None:
                with contextlib.suppress(Exception):  # the store may be what failed; keep the original error
                    tracker = cast("Tracker", sink.close())
                    tracker.finish("# perflab summary\n\nThe suite was interrupted.\n", {"interrupted": True},
                                   failed=True)  # fmt: skip
            raise
    save_durations(durations, signature, suite)
    tracker = cast("Tracker", sink.close()) if sink is not None else None
    from bench.summary import summary_dict, summary_markdown

    summary = summary_dict(suite)
    if tracker is not None:
        tracker.finish(summary_markdown(summary), summary, failed=False)
    console.print(_table(suite))
    console.print(
        f"{summary['n_variants_ok']}/{summary['n_variants']} variants ok, "
        f"{summary['n_pairs_verified']}/{summary['n_pairs']} pairs verified in {suite.wall_s:.1f} s"
        + (f", MLflow parent run {tracker.parent_run_id}" if tracker is not None else "")
    )
    if b := suite.time_breakdown():
        console.print(
            f"time: first variant started at {b['first_start_s']:.1f} s; {b['workers']} worker(s) ran variants "
            f"{b['run_s']:.1f} s, compared outputs {b['compare_s']:.1f} s"
            + (f" ({b['compare_beside_s']:.1f} s of it beside the next variant)" if b["compare_beside_s"] else "")
            + f", idled {b['idle_s']:.1f} s"
            + (
                f"; children started ahead ran {b['ahead_s']:.1f} s beside the previous variant, and kept their "
                f"workers waiting {b['late_s']:.1f} s at open gates (start-up, CUDA context)"
                if b["ahead_s"]
                else ""
            )
        )
    if b and b.get("alone_wait_s"):
        console.print(
            f"host-bound measurements (timed on the host's clock) waited {b['alone_wait_s']:.1f} s in all to run "
            "alone on the host"
        )
    if before_s is not None:
        console.print(f"command: the suite began {before_s:.2f} s after the command started (interpreter, imports)")
    if sink is not None and sink.ready_s is not None and sink.wait_s is not None:
        console.print(
            f"MLflow: import and store open took {sink.ready_s:.1f} s (on a thread, beside the variants); after "
            f"the last variant, {sink.wait_s:.1f} s went on logging results still queued"
        )
    if not cold_start:
        from bench import server

        console.print(
            "server: started by this command (its imports delayed the first variant)"
            if server.STARTED_HERE
            else "server: kept from an earlier command (`perflab server stop` ends it)"
        )
    if not suite.all_ok:
        raise typer.Exit(1)


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc, 10 ms resolution); None elsewhere."""
    import os

    try:
        with open("/proc/self/stat") as f:
            start_ticks = float(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _durations_path() -> Path:
    """``$PERFLAB_DURATIONS``, else ``~/.cache/perflab/durations.json``: each variant's last time, the
    order hint for parallel suites (longest first)."""
    import os

    env = os.environ.get("PERFLAB_DURATIONS")
    return Path(env) if env else Path.home() / ".cache" / "perflab" / "durations.json"


def _check_workers(gpus: str | None, jobs: int | None) -> list[str] | None:
    """The GPU indices of ``--gpus`` (None without it); errors in the flags, before anything starts."""
    if gpus is None:
        return None
    ids = [g.strip() for g in gpus.split(",") if g.strip()]
    if not ids or not all(g.isdigit() for g in ids):
        raise PerflabError(f"--gpus {gpus!r} is not a comma-separated list of GPU indices such as '0,1'")
    if jobs is not None:
        raise PerflabError("--gpus and --jobs exclude each other: --gpus runs one worker per GPU")
    return ids


def _workers(device: str, gpus: str | None, jobs: int | None) -> list[dict[str, str]]:
    """One environment per worker: pinned to a GPU each, or plain CPU jobs."""
    import os

    ids = _check_workers(gpus, jobs)
    if ids is not None:
        return [{"CUDA_VISIBLE_DEVICES": g} for g in ids]
    if device == "cpu" or not _cuda_count():
        return [{} for _ in range(jobs or 1)]
    if jobs is not None and jobs > 1:
        raise PerflabError(
            f"--jobs {jobs} on a GPU run would time variants against each other on one GPU; "
            "use --gpus to run one worker per GPU, or --device cpu"
        )
    if device.startswith("cuda:"):
        return [{}]  # the user picked one device
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible_ids = [g.strip() for g in visible.split(",")] if visible else [str(i) for i in range(_cuda_count())]
    return [{"CUDA_VISIBLE_DEVICES": g} for g in visible_ids] if len(visible_ids) > 1 else [{}]


def _cuda_count() -> int:
    """GPUs a worker each: NVML's count (no torch import in this process: ~4 s on a GPU host), unless
    a GPU is in MIG mode or NVML is missing, where torch answers (MIG instances are not NVML devices)."""
    from bench.runner import _cuda_available, cuda_likely, nvml_gpu_count

    if not cuda_likely():
        return 0
    count = nvml_gpu_count()
    if count is not None:
        return count
    if not _cuda_available():
        return 0
    import torch

    return torch.cuda.device_count()


server_app = typer.Typer(
    no_args_is_help=True, help="the pre-warmed server variants are forked from (kept between runs)"
)
app.add_typer(server_app, name="server")


@server_app.command("status")
def server_status() -> None:
    """List this user's servers: pid, Triton mode, uptime, children running."""
    from bench import server

    found = server.servers()
    if not found:
        console.print(f"no server running (socket directory {server.runtime_dir()})")
    for s in found:
        if s.get("starting"):
            console.print(f"server {s['pid']} key {s['key']}: starting (importing torch)")
            continue
        errors = f", preload errors: {s['preload_errors']}" if s["preload_errors"] else ""
        console.print(
            f"server {s['pid']} key {s['key']}: TRITON_INTERPRET={s['triton_interpret']!r}, up {s['uptime_s']:.0f} s, "
            f"{s['children']} child(ren), exits after {s['idle_limit_s']:.0f} s idle{escape(errors)}"
        )


@server_app.command("stop")
def server_stop() -> None:
    """Stop this user's servers (their running children are killed); the next run starts a fresh one."""
    from bench import server

    pids = server.stop_all()
    console.print(f"stopped {len(pids)} server(s)" + (f": {', '.join(map(str, pids))}" if pids else ""))


def _line(result: VariantResult, comparison: Comparison | None) -> str:
    colour = {"ok": "green", "skipped": "yellow"}.get(result.status, "red")
    text = f"[{colour}]{result.status:>7}[/] {escape(result.spec.key)}"
    if result.skip_reason:
        text += escape(f"  ({result.skip_reason})")
    if result.median_ms is not None:
        text += f"  median {result.median_ms:.4f} ms"
    if result.status != "ok" and result.error:
        text += escape(f"  [{result.failed_stage}] {result.error.message.splitlines()[0][:120]}")
    if comparison is not None and comparison.speedup is not None:
        from bench.summary import speedup_text

        text += "  speedup " + escape(speedup_text(comparison.model_dump()))
    if comparison is not None:
        text += "  verified" if comparison.verification.verified else f"  NOT verified ({comparison.status})"
        if comparison.across_gpus is not None:
            text += escape(f"  [across GPUs {comparison.across_gpus}]")
    if result.profile is not None:
        from bench.profiling import summary_line

        text += escape(f"\n          bound: {summary_line(result.profile)}")
    return text


def _table(suite: SuiteResult) -> Table:
    from bench.summary import speedup_text

    table = Table(title="perflab results")
    for col in ("example", "variant", "baseline ms", "optimized ms", "speedup", "verified", "status"):
        table.add_column(col, justify="right" if "ms" in col or col == "speedup" else "left")
    for c in suite.comparisons:
        table.add_row(
            f"{c.chapter}:{c.example}",
            c.variant,
            f"{c.baseline_median_ms:.4f}" if c.baseline_median_ms is not None else "—",
            f"{c.optimized_median_ms:.4f}" if c.optimized_median_ms is not None else "—",
            speedup_text(c.model_dump()),
            "yes" if c.verification.verified else "no",
            c.status,
        )
    return table


@app.command("list")
def list_(targets: TargetsOpt = None, chapters_dir: ChaptersOpt = None) -> None:
    """List chapters, examples and their variants."""
    catalog, examples = _examples(targets, chapters_dir)
    table = Table(title=f"examples under {catalog.root}")
    for col in ("target", "variants", "note"):
        table.add_column(col)
    for e in examples:
        table.add_row(e.target, ", ".join(v.variant for v in e.variants), "" if e.optimized else "no optimized partner")
    console.print(table)
    for orphan in catalog.orphans:
        console.print(f"[yellow]optimized file without baseline:[/] {escape(orphan)}")


@app.command()
def verify(
    targets: TargetsOpt = None,
    chapters_dir: ChaptersOpt = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N")] = None,
    timeout_multiplier: Annotated[float | None, typer.Option(help="scales every stage limit")] = None,
) -> None:
    """Import, instantiate and set up each benchmark in isolation, without timing."""
    import tempfile

    from bench.runner import run_variant

    cli_layer = _cli_layer(device=device, timeout_multiplier=timeout_multiplier)
    resolve_config(cli_layer)
    _, examples = _examples(targets, chapters_dir)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="perflab-verify-") as tmp:
        for e in examples:
            for spec in e.variants:
                result = run_variant(spec, Path(tmp) / spec.key.replace(":", "_"), cli_layer=cli_layer, mode="verify")
                failed += result.status != "ok"
                console.print(_line(result, None))
    if failed:
        raise typer.Exit(1)


@app.command()
def profile(
    targets: Annotated[list[str], typer.Argument(help="ch7:<example>, ch7, ...: every variant of each is profiled")],
    profile_mode: ProfileModeOpt = None,
    ncu_preset: NcuPresetOpt = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N")] = None,
    timeout_multiplier: Annotated[float | None, typer.Option(help="scales every stage limit")] = None,
    smoke: Annotated[bool | None, typer.Option("--smoke/--full-size", help="force smoke or full sizes")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: perflab)")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI")] = None,
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")] = False,
    chapters_dir: ChaptersOpt = None,
    keep_workdir: Annotated[Path | None, typer.Option(help="keep profiles and logs in this directory")] = None,
) -> None:
    """Profile the variants of examples without timing them (torch.profiler, ncu, nsys) and log the profiles."""
    import shutil
    import tempfile

    from bench.profiling import profile_variant

    cli_layer = _cli_layer(
        enable_profiling=True, profile_mode=profile_mode, ncu_preset=ncu_preset, device=device,
        timeout_multiplier=timeout_multiplier, smoke=smoke,
    )  # fmt: skip
    resolve_config(cli_layer)
    _, examples = _examples(targets, chapters_dir)
    tracker = None
    if not no_track:
        from bench.manifest import host_manifest
        from bench.tracking import Tracker

        tracker = Tracker(
            experiment=experiment, tracking_uri=tracking_uri, run_name=f"perflab profile {','.join(targets)}",
            host_manifest=host_manifest(), tags={"perflab.kind": "profile", "perflab.targets": ",".join(targets)},
        )  # fmt: skip
        tracker.start()
    root = keep_workdir or Path(tempfile.mkdtemp(prefix="perflab-profile-"))
    failed = 0
    try:
        for e in examples:
            for spec in e.variants:
                wd = root / spec.chapter / spec.example / spec.variant
                result = profile_variant(spec, wd, cli_layer=cli_layer)
                failed += result.status not in ("ok", "skipped")
                if tracker is not None:
                    tracker.log_variant(result)
                console.print(_line(result, None))
    finally:
        if tracker is not None:
            tracker.__exit__(None, None, None)  # FINISHED, and no suite_status: not a suite
        if keep_workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    if tracker is not None:
        console.print(f"MLflow parent run {tracker.parent_run_id}")
    if failed:
        raise typer.Exit(1)


@app.command()
def selfcheck(
    repeats: Annotated[int, typer.Option(min=2, help="measurements per mode and workload (CV is over these)")] = 7,
    workload: Annotated[
        list[str] | None, typer.Option("--workload", help="tiny_add, scale_64mib, matmul_bf16, cpu_sum (default: all)")
    ] = None,
    mode: Annotated[list[str] | None, typer.Option("--mode", help="timing modes to check (default: all)")] = None,
    ncu: Annotated[bool, typer.Option("--ncu/--no-ncu", help="also compare with Nsight Compute when on PATH")] = True,
    out: Annotated[Path | None, typer.Option(help="write selfcheck.md and selfcheck.json here")] = None,
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")] = False,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: perflab)")] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="timing settings to check instead of the defaults (a config file)")
    ] = None,
    in_process: Annotated[
        bool, typer.Option("--in-process", help="measure everything in this process (default: each cell fresh)")
    ] = False,
) -> None:
    """Time known workloads with every timing mode and compare each with ground truth."""
    import json

    from bench.selfcheck import markdown, run_selfcheck

    layer = load_config_file(config) if config else None
    try:
        report = run_selfcheck(
            repeats=repeats,
            workloads=workload,
            modes=mode,
            use_ncu=ncu,
            log=lambda text: console.print(text, markup=False),  # notes hold "[flush, call]"
            config_layer=layer,
            isolate=not in_process,
        )
    except ValueError as exc:
        raise PerflabError(str(exc)) from None
    text = markdown(report)
    _emit(text, report, out, "selfcheck")
    if not no_track:
        from bench.tracking import log_run

        metrics = {}
        for c in report["cells"]:
            key = f"{c['workload']}.{c['mode']}"
            metrics[f"{key}.median_us"] = c["median_ms"] * 1e3
            metrics[f"{key}.error_pct"] = c["error_pct"]
            if c["cv_pct"] is not None:
                metrics[f"{key}.cv_pct"] = c["cv_pct"]
        run_id = log_run(
            "perflab selfcheck",
            params={"repeats": repeats, "device": report["device"], "torch": report["torch"], **(layer or {})},
            metrics=metrics,
            artifacts={"selfcheck.md": text, "selfcheck.json": json.dumps(report, indent=2)},
            tags={"perflab.kind": "selfcheck"},
            experiment=experiment,
        )
        console.print(f"logged to MLflow run {run_id}")


@app.command()
def show(
    run_id: Annotated[str | None, typer.Option(help="parent run id (default: the latest completed suite)")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI")] = None,
) -> None:
    """Print a suite's pairs as a Markdown table, straight from the MLflow store."""
    from bench.tracking import suite_runs

    try:
        parent, runs = suite_runs(run_id, tracking_uri)
    except LookupError as exc:
        raise PerflabError(str(exc)) from None
    print(pairs_markdown(parent, runs))


def pairs_markdown(parent: str, runs: list[Any]) -> str:
    """One row per optimized variant, numbers read from the runs' metrics and tags (never typed)."""
    by_name = {r.info.run_name: r for r in runs}
    gpus = sorted({r.data.tags.get("perflab.gpu") or r.data.tags.get("perflab.device", "?") for r in runs})
    lines = [
        f"MLflow parent run `{parent}`; device(s): {', '.join(gpus)}",
        "",
        "| example | variant | baseline median µs | optimized median µs | speedup | verified | "
        "baseline GB/s | optimized GB/s | optimized CV |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|",
    ]

    def num(run: Any, key: str, scale: float = 1.0, spec: str = ".1f") -> str:
        value = run.data.metrics.get(key) if run is not None else None
        return "—" if value is None else format(value * scale, spec)

    for _, run in sorted(by_name.items()):
        tags = run.data.tags
        if tags.get("perflab.variant", "baseline") == "baseline":
            continue
        base = by_name.get(f"{tags['perflab.chapter']}:{tags['perflab.example']}:baseline")
        lines.append(
            f"| {tags['perflab.chapter']}:{tags['perflab.example']} | {tags['perflab.variant']} | "
            f"{num(base, 'time_median_ms', 1e3)} | {num(run, 'time_median_ms', 1e3)} | "
            f"{num(run, 'speedup', spec='.2f')}× | {tags.get('perflab.verified', 'false')} | "
            f"{num(base, 'achieved_gbps', spec='.0f')} | {num(run, 'achieved_gbps', spec='.0f')} | "
            f"{num(run, 'time_cv', 100, '.2f')}% |"
        )
    return "\n".join(lines)


TrackingOpt = Annotated[
    str | None, typer.Option(help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or ./mlflow.db)")
]


def _bad_input(exc: Exception) -> typer.Exit:
    err_console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)  # one line, never cut
    return typer.Exit(2)


# analysis/ is imported inside the commands: `import bench` stays light and bench never depends on
# analysis at import time (analysis depends on bench).


@app.command("compare")
def compare_cmd(
    run_a: Annotated[str, typer.Argument(help="run id A (the reference): a variant run or a suite's parent run")],
    run_b: Annotated[str, typer.Argument(help="run id B, of the same kind; deltas are B - A")],
    all_metrics: Annotated[bool, typer.Option("--all", help="also metrics with no better side")] = False,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Metric deltas between two runs; suites are matched variant by variant, by run name."""
    from analysis.deltas import compare_runs, compare_table

    try:
        cmp = compare_runs(run_a, run_b, tracking_uri, all_metrics=all_metrics)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    console.print(compare_table(cmp))
    for side, names in (("A", cmp.only_a), ("B", cmp.only_b)):
        if names:
            console.print(f"only in {side}: " + escape(", ".join(names)))


@app.command()
def report(
    run_id: Annotated[
        str | None, typer.Option(help="suite parent run id (default: the latest completed suite)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="directory for the files (default: ./perflab-report-<id>)")] = None,
    no_log: Annotated[bool, typer.Option("--no-log", help="do not attach the files to the parent run")] = False,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Write report.json, report.md and report.csv for a suite and log them on its parent run."""
    from analysis.report import write_report

    try:
        rep, where = write_report(run_id, out, tracking_uri, log=not no_log)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    o = rep["overall"]
    gm = o["speedup_geomean"]
    console.print(
        f"{o['succeeded']}/{o['variants']} variants ok, {o['pairs_counted']}/{o['pairs']} pairs counted, "
        f"geomean speedup {'—' if gm is None else f'{gm:.3f}x'}; wrote {escape(str(where))}"
        + ("" if no_log else f", logged to run {o['parent_run_id']}")
    )


@app.command()
def regressions(
    run_id: Annotated[
        str | None, typer.Option(help="suite parent run or variant run (default: the latest completed suite)")
    ] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="previous runs pooled as history")] = 5,
    threshold: Annotated[float, typer.Option(min=0.0, help="relative median slowdown to flag (0.05 = 5%)")] = 0.05,
    alpha: Annotated[float, typer.Option(help="one-sided Mann-Whitney U significance level")] = 0.01,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Each variant vs its previous runs on the same hardware and software; exits 1 on a regression."""
    from analysis.regression import check_suite, regression_table

    try:
        checked, rows = check_suite(run_id, k=k, threshold=threshold, alpha=alpha, tracking_uri=tracking_uri)
    except (LookupError, ValueError) as exc:
        raise _bad_input(exc) from None
    console.print(regression_table(rows))
    verdicts = ("regressed", "improved", "ok", "no-history", "not-measured")
    counts = {s: sum(r.status == s for r in rows) for s in verdicts}
    console.print(f"run {checked}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    if counts["regressed"]:
        raise typer.Exit(1)


@app.command()
def overhead(
    n: Annotated[int, typer.Option("--n", min=0, help="trivial variants per launch path (0: skip)")] = 10,
    out: Annotated[Path | None, typer.Option(help="also write overhead.md and overhead.json here")] = None,
    chapter_wall: Annotated[
        str | None,
        typer.Option(help="also time `perflab run -t TARGET` on one worker vs all (--gpus, else --jobs)"),
    ] = None,
    gpus: Annotated[str | None, typer.Option(help="with --chapter-wall: GPU indices (default: every visible)")] = None,
    jobs: Annotated[int | None, typer.Option(min=2, help="with --chapter-wall on the CPU: parallel jobs")] = None,
    smoke: Annotated[bool | None, typer.Option("--smoke/--full-size", help="with --chapter-wall")] = None,
    repeats: Annotated[
        int, typer.Option(min=1, help="with --chapter-wall: (k, one) pairs of runs; the ratio is their median")
    ] = 1,
    chapters_dir: ChaptersOpt = None,
    fresh_server: Annotated[
        bool,
        typer.Option(
            "--fresh-server",
            help="stop this user's servers first (their running children are killed): the first variant pays a start",
        ),
    ] = False,
) -> None:
    """Per-variant cost of isolation: fast path (a fork of the pre-warmed server) vs cold start (fresh
    interpreter); with --chapter-wall, a chapter's wall time on one worker vs several."""
    from bench.overhead import chapter_wall as time_chapter
    from bench.overhead import chapter_wall_markdown, markdown, run_overhead

    if n == 1:
        raise PerflabError("--n 1 is too small; use at least 2 variants per path, or 0 to skip")
    if n:
        report = run_overhead(n, fresh_server=fresh_server)
        _emit(markdown(report), report, out, "overhead")
    if chapter_wall is None:
        return
    store = out / "chapter_wall.db" if out is not None else None  # the three runs' MLflow store, kept with --out
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    extra = [*(["--smoke"] if smoke else ["--full-size"] if smoke is False else [])]
    extra += ["--chapters-dir", str(chapters_dir)] if chapters_dir else []
    if jobs is not None and gpus is None:
        wall = time_chapter(
            chapter_wall, [str(i) for i in range(jobs)], "--jobs", [*extra, "--device", "cpu"], store, repeats=repeats
        )
    else:
        # --gpus parsed (and refused beside --jobs) as `perflab run` does; without it, every visible GPU
        ids = [env["CUDA_VISIBLE_DEVICES"] for env in _workers("cuda", gpus, jobs) if "CUDA_VISIBLE_DEVICES" in env]
        if len(ids) < 2:
            raise PerflabError(
                f"--chapter-wall compares one worker with several: --gpus {gpus or ','.join(ids)!r} names "
                f"{len(ids)} GPU(s); pass at least two GPU indices (e.g. 0,1), or --jobs K on the CPU"
            )
        wall = time_chapter(chapter_wall, ids, "--gpus", extra, store, repeats=repeats)
    _emit(chapter_wall_markdown(wall), wall, out, "chapter_wall")


def _emit(text: str, report: dict[str, Any], out: Path | None, stem: str) -> None:
    """Print a Markdown table; with ``out``, also keep it and the raw report as <stem>.md / .json."""
    import json

    console.print(text, markup=False)  # table cells are data: "[L2 flush]" is not a style
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{stem}.md").write_text(text)
        (out / f"{stem}.json").write_text(json.dumps(report, indent=2))


# Packages built on bench add their commands here: a module ``<pkg>.cli`` with ``register(app)``,
# cheap to import (heavy imports inside the commands). bench itself never imports them otherwise.
PLUGINS = ("analysis.cli", "sweeps.cli", "kernels.cli")


def _register_plugins() -> None:
    import importlib

    for name in PLUGINS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # The plugin or its package is absent (e.g. an editable install made before the package
            # existed): skip it. A module missing *inside* the plugin is a real error.
            if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
                raise
            continue
        module.register(app)


_register_plugins()


def main() -> None:
    """The ``perflab`` command. Ends with ``os._exit`` once the atexit handlers ran: tearing down the
    interpreter with torch, mlflow and SQLAlchemy loaded costs ~1.3 s here (seconds on a GPU host) and
    saves nothing (files are written and closed, runs are committed, children are gone)."""
    import os

    try:
        app()
        code: int | str | None = 0
    except PerflabError as exc:
        err_console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)  # one line, never cut
        code = 2
    except SystemExit as exc:  # typer's own exit (the command's code, usage errors)
        code = exc.code
    if isinstance(code, str):  # sys.exit("message"): printed, status 1, as the interpreter would
        print(code, file=sys.stderr)
        code = 1
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    main()
