"""``perflab run``: a suite from the command line: flags → config layer, workers, MLflow on a thread, the report.

The command never imports torch (~4 s on a GPU host): the server's children do the work (bench.isolate);
it starts the server first, so that the server's imports overlap everything else the command does.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from bench.cli.again import given_options
from bench.cli.common import (
    ChaptersOpt,
    ColdCompileOpt,
    ColdStartOpt,
    DeviceOpt,
    EnergyOpt,
    ExperimentOpt,
    NcuPresetOpt,
    NoTrackOpt,
    ProfileModeOpt,
    ProfileOpt,
    RoundChildrenOpt,
    RoundsOpt,
    SanitizeOpt,
    SmokeOpt,
    TargetsOpt,
    TimeoutOpt,
    chapter_prefix,
    cli_layer,
    examples_for,
    line,
    line_width,
    set_layer,
)
from bench.cli.deadline import SuiteDeadline, SuiteTimeout, check_suite_timeout
from bench.cli.output import err_console, progress, warning
from bench.cli.report import (
    Finished,
    Stopped,
    out_dir,
    partial_suite,
    report_suite,
    rest_command,
    stopped,
    stopped_markdown,
)
from bench.cli.shard import campaign_tags, shard_of
from bench.cli.workers import check_count, check_device, check_workers, workers_for
from bench.define.config import BenchmarkConfig, ConfigError, load_config_file, resolve_config
from bench.define.discovery import Example
from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.errors import PerflabError

if TYPE_CHECKING:
    from bench.isolate.sink import BackgroundSink
    from bench.record.outdir import OutDir
    from bench.record.upload import SpoolSink

IterationsOpt = Annotated[int | None, typer.Option(help="timed calls per variant")]
WarmupOpt = Annotated[int | None, typer.Option(help="untimed calls before measurement")]
SeedOpt = Annotated[int | None, typer.Option(help="seed for random/numpy/torch/CUDA")]
ReproducibleOpt = Annotated[bool, typer.Option("--reproducible", help="deterministic algorithms")]
WarmCacheOpt = Annotated[bool, typer.Option("--warm-cache", help="do not flush L2 before GPU samples")]
TimingModeOpt = Annotated[
    str | None, typer.Option(help="auto, cpu, cuda_event, cuda_graph, triton, pytorch (bench/measure/clocks.py)")
]
NoiseOpt = Annotated[float | None, typer.Option(help="adaptive sampling stops at this relative standard error (0.005)")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="suite config file (.yaml/.json/.toml)")]
TrackingUriOpt = Annotated[
    str | None, typer.Option(help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or MLflow's default)")
]
KeepOpt = Annotated[Path | None, typer.Option(help="keep child outputs/logs in this directory")]
GpusOpt = Annotated[
    str | None, typer.Option(help="GPU indices, e.g. 0,1: one worker per GPU (default: every visible GPU)")
]
JobsOpt = Annotated[int | None, typer.Option(help="parallel workers for CPU-only runs: 1 or more")]
RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="run the examples on a Ray cluster's GPUs: 'auto' (the cluster of this host, or $RAY_ADDRESS) or its "
        "address HOST:6379; results are logged from here (pip install -e '.[ray]')",
    ),
]
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard", help="I/N: only the I-th of N parts of the examples, 0 <= I < N (Slurm: $SLURM_ARRAY_TASK_ID/N)"
    ),
]
SuiteTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--suite-timeout", metavar="SECONDS",
        help="stop the suite this long after the command started, as on Ctrl-C: what finished is logged, what did "
        "not is named (exit status 124)",
    ),
]  # fmt: skip
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out", metavar="DIR",
        help="also write the summary (JSON, Markdown), each variant's result as the store holds it and a JUnit XML "
        "of the pairs' verdicts here (what an earlier run wrote there is removed first)",
    ),
]  # fmt: skip
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="FIELD=VALUE",
        help="a config field for every variant, over the benchmarks' own get_config() (repeatable; e.g. --set "
        "max_measure_seconds=4); the fields: README, Configuration",
    ),
]  # fmt: skip
OverlapOpt = Annotated[
    bool,
    typer.Option(
        "--overlap/--no-overlap",
        envvar="PERFLAB_OVERLAP",
        help="start each variant's child (start-up, CUDA context) while the previous one on its GPU checks "
        "its outputs and exits; held before setup() until that child is gone (never during a measurement)",
    ),
]


def set_given(items: list[str] | None, flags: dict[str, Any]) -> dict[str, Any]:
    """``--set``'s layer; a field also given by its own flag is refused (which one wins would be a guess)."""
    given = set_layer(items)
    both = sorted(set(given) & set(flags))
    if both:
        raise ConfigError(f"--set {both[0]} and a flag of its own (set to {flags[both[0]]!r}) both given; give one")
    return given


def run(
    ctx: typer.Context, targets: TargetsOpt = None,
    iterations: IterationsOpt = None, warmup: WarmupOpt = None, seed: SeedOpt = None,
    device: DeviceOpt = None, timeout_multiplier: TimeoutOpt = None, reproducible: ReproducibleOpt = False,
    cold_start: ColdStartOpt = False, profile: ProfileOpt = None, profile_mode: ProfileModeOpt = None,
    ncu_preset: NcuPresetOpt = None, smoke: SmokeOpt = None, warm_cache: WarmCacheOpt = False,
    timing_mode: TimingModeOpt = None, noise_target: NoiseOpt = None, config: ConfigOpt = None,
    experiment: ExperimentOpt = None, tracking_uri: TrackingUriOpt = None, no_track: NoTrackOpt = False,
    chapters_dir: ChaptersOpt = None, keep_workdir: KeepOpt = None, gpus: GpusOpt = None, jobs: JobsOpt = None,
    overlap: OverlapOpt = True, ray: RayOpt = None, shard: ShardOpt = None, energy: EnergyOpt = False,
    sanitize: SanitizeOpt = False, suite_timeout: SuiteTimeoutOpt = None, out: OutOpt = None,
    rounds: RoundsOpt = None, cold_compile: ColdCompileOpt = False, round_children: RoundChildrenOpt = None,
    settings: SetOpt = None,
) -> None:  # fmt: skip
    """Measure baseline and optimized variants, verify outputs, log every variant to MLflow."""
    suite_layer = load_config_file(config) if config else None
    layer = cli_layer(
        iterations=iterations, warmup=warmup, seed=seed, device=device, timeout_multiplier=timeout_multiplier,
        deterministic=True if reproducible else None,
        enable_profiling=True if sanitize or (profile is None and profile_mode is not None) else profile,
        profile_mode="sanitize" if sanitize else profile_mode, ncu_preset=ncu_preset, smoke=smoke,
        flush_l2=False if warm_cache else None,
        timing_mode=timing_mode, noise_target=noise_target, measure_energy=True if energy else None,
        min_rounds=rounds, max_rounds=rounds, cold_compile=True if cold_compile else None,
        round_children=round_children,
    )  # fmt: skip
    layer = {**set_given(settings, layer), **layer}
    effective = resolve_config(suite_layer, layer)  # reject bad flags before anything starts
    check_suite_timeout(suite_timeout)
    if ray is None:
        check_device(effective.device)
    files = out_dir(out)
    if not no_track:
        check_store(tracking_uri)
    catalog, examples = examples_for(targets, chapters_dir)
    for orphan in catalog.orphans:
        warning(f"{orphan} has no baseline_ partner; skipped")
    if not examples:
        raise PerflabError(f"no examples found under {catalog.root}")
    check_workers(gpus, jobs, effective.device if ray is None else None)
    check_count("--jobs", jobs)
    if ray is not None and (gpus is not None or jobs is not None or shard is not None):
        raise PerflabError("--ray places the examples on the cluster's GPUs itself: without --gpus, --jobs or --shard")
    if ray is not None:
        from bench.isolate.cluster import check_ray

        check_ray(ray)  # before the suite's parent run: a wrong address leaves nothing in the store
    tags = campaign_tags(shard, examples, effective)  # before the split: every part derives the same id
    examples = shard_of(examples, shard) if shard is not None else examples
    execute(examples, effective, suite_layer, layer, ",".join(targets or ["all"]), tags, experiment=experiment,
            tracking_uri=tracking_uri, no_track=no_track, cold_start=cold_start, overlap=overlap, gpus=gpus,
            jobs=jobs, ray=ray, chapters_dir=chapters_dir, keep_workdir=keep_workdir, suite_timeout=suite_timeout,
            files=files, again=given_options(ctx))  # fmt: skip


def check_store(tracking_uri: str | None) -> None:
    """A tracking URI no store takes, or a bad store wait, refused before anything runs."""
    from bench.record.store import check_tracking_uri
    from bench.record.upload import store_wait_s

    check_tracking_uri(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"))
    store_wait_s()


def execute(
    examples: list[Example], effective: BenchmarkConfig, suite_layer: Any, layer: dict[str, Any], targets: str,
    tags: dict[str, str], *, experiment: str | None, tracking_uri: str | None, no_track: bool, cold_start: bool,
    overlap: bool, gpus: str | None, jobs: int | None, ray: str | None, chapters_dir: Path | None,
    keep_workdir: Path | None, suite_timeout: float | None = None, files: OutDir | None = None,
    again: list[str] | None = None,
) -> None:  # fmt: skip
    """Run ``examples`` as one suite (``targets``: what they were asked as; ``tags``: the parent run's own), log it,
    print the table (and write ``files``, with ``--out``); exit status 1 when a variant is not ok or a pair not
    verified, 124 when ``suite_timeout`` ran out (``perflab run``, ``perflab ab``). ``again``: the command's options
    that a stopped suite's rest repeats (bench.cli.again)."""
    if not cold_start and ray is None:
        from bench.isolate.process import prestart_server

        # First: the server's imports (torch) overlap everything below, the MLflow start-up included.
        prestart_server(effective)
    workers = workers_for(effective.device, gpus, jobs) if ray is None else []
    if files is not None and files.begin():  # the directory holds this suite's results only
        err_console.print(f"--out {files.root}: the files of an earlier run there removed", markup=False,
                          soft_wrap=True)  # fmt: skip
    sink = None if no_track else _sink(experiment, tracking_uri, targets, cold_start, tags)
    options = {"ray": ray} if ray is not None else {
        "workdir": keep_workdir, "keep_workdir": keep_workdir is not None}  # fmt: skip
    suite, before_s, stop = _run(examples, effective, workers, sink, files, suite_timeout, (chapters_dir, again or []),
                                 suite_layer=suite_layer, cli_layer=layer, cold_start=cold_start, overlap=overlap,
                                 **options)  # fmt: skip
    tracker = cast("SpoolSink", sink.close()) if sink is not None else None
    server_ran = not (cold_start or ray is not None)  # --ray: no server here ran them
    if not report_suite(suite, tracker, sink, not server_ran, before_s, files, stop) or not suite.all_ok or stop:
        raise typer.Exit(124 if stop is not None else 1)  # 124: its time ran out, as `timeout` says


def _sink(
    experiment: str | None, tracking_uri: str | None, targets: str, cold_start: bool, tags: dict[str, str]
) -> BackgroundSink:
    """Results kept on disk first (bench.record.spool), then logged to MLflow from a thread of its own (import +
    store: ~10 s on a GPU host) while the first variants run; a store that fails loses nothing."""
    from bench.isolate.sink import BackgroundSink
    from bench.record.spool import Spool, absolute_uri
    from bench.record.store import experiment_name

    spool = Spool.create({
        "tracking_uri": absolute_uri(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")),
        "experiment": experiment_name(experiment), "run_name": None,  # named for its chapters, device and date
        "tags": {"perflab.targets": targets, "perflab.cold_start": str(cold_start).lower(), **tags},
        "adopt": os.environ.get("MLFLOW_RUN_ID"),  # inside `mlflow run`: its run is the parent
    })  # fmt: skip

    def open_sink() -> SpoolSink:
        from bench.record.manifest import host_manifest
        from bench.record.upload import SpoolSink, Uploader, quiet_store

        quiet_store()
        spool.suite["host"] = host_manifest()
        spool.save_suite()
        return SpoolSink(spool, Uploader(spool))

    return BackgroundSink(open_sink, keep=spool.add)


def _run(
    examples: list[Example], effective: BenchmarkConfig, workers: list[dict[str, str]], sink: BackgroundSink | None,
    files: OutDir | None, suite_timeout: float | None, rest: tuple[Path | None, list[str]], **options: object,
) -> tuple[SuiteResult, float | None, Stopped | None]:  # fmt: skip
    """``run_suite`` with a progress bar and a line per variant (and its files, with ``--out``), and how long after
    the command's start it began; the durations kept for the next run's order. A suite whose ``suite_timeout``
    ran out is what finished, with what did not (``Stopped``); ``rest``: the chapters directory and the command's
    options, for the command that runs what a stopped suite left."""
    from bench.isolate.suite import expected_note, load_durations, run_suite, save_durations

    chapters_dir = rest[0]

    durations = durations_path()
    signature = durations_signature(effective, bool(options["cold_start"]))
    last = load_durations(durations, signature)
    expected = last if len(workers) > 1 or options.get("ray") else None  # the order: longest first
    note = None if options.get("ray") else expected_note(examples, last, len(workers), suite_timeout)
    if note:
        err_console.print(note, markup=False, soft_wrap=True)
    prefix = chapter_prefix([e.target for e in examples])
    total = sum(len(e.variants) for e in examples)
    finished: Finished = []
    timeline: list[dict[str, Any]] = []  # each variant's time-line entry, kept should the suite be stopped
    with progress(f"{prefix.rstrip(':') or 'suite'}: variants", total) as report:

        def on_result(result: VariantResult, comparison: Comparison | None) -> None:
            finished.append((result, comparison))
            if files is not None:
                files.variant(result, comparison)
            # Wrapped on a terminal only: off one (a CI log, `| cat`) a variant is one line, counted, which the
            # README describes and scripts/gpu_session.sh's awk reads (status and name, then what the tools found).
            report(line(result, comparison, prefix, line_width()))

        before_s = process_age_s()  # interpreter start, imports, discovery, server and MLflow threads started
        deadline, t0 = SuiteDeadline(suite_timeout, before_s), time.monotonic()
        try:
            with deadline:
                if options.get("ray") is not None:
                    suite = _on_ray(examples, sink, on_result, expected, chapters_dir=chapters_dir,
                                    on_timeline=timeline.append, **options)  # fmt: skip
                else:
                    suite = run_suite(examples, sink=sink, on_result=on_result, workers=workers, expected_s=expected,
                                      on_timeline=timeline.append, **options)  # type: ignore[arg-type]  # fmt: skip
        except SuiteTimeout as exc:  # what finished is the suite, with its time line; the rest is named
            return partial_suite(examples, finished, time.monotonic() - t0, timeline), before_s, stopped(
                examples, finished, "timeout", str(exc), *rest)  # fmt: skip
        except BaseException as exc:
            wall_s = time.monotonic() - t0
            _end_unfinished(sink, examples, isinstance(exc, KeyboardInterrupt), files, finished, rest, wall_s,
                            timeline)  # fmt: skip
            raise
    save_durations(durations, signature, suite)
    return suite, before_s, None


def _end_unfinished(
    sink: BackgroundSink | None, examples: list[Example], interrupted: bool, files: OutDir | None, finished: Finished,
    rest: tuple[Path | None, list[str]], wall_s: float = 0.0, timeline: Sequence[dict[str, Any]] = (),
) -> None:  # fmt: skip
    """A suite that did not end (Ctrl-C, SIGTERM or SIGHUP: ``interrupted``; else an error): the variants that
    finished are logged (and in ``files``), the parent run ended (KILLED, ``perflab.suite_status`` ``interrupted``;
    or FAILED), and one line says how many and where they are (with ``--no-track``: that nothing is logged), a
    second the command that runs the examples left (``rest``: their chapters directory, the command's options).
    ``timeline``: the time-line entries of what ran, for the files' summary."""
    what = "interrupted" if interrupted else "stopped by an error"
    total = sum(len(e.variants) for e in examples)
    if files is not None:
        with contextlib.suppress(Exception):  # keep the original error
            from bench.record.summary import summary_dict, summary_markdown

            stop = stopped(examples, finished, "interrupted" if interrupted else "failed", what, *rest)
            summary = {**summary_dict(partial_suite(examples, finished, wall_s, timeline)), "suite_status": stop.status,
                       "not_finished": stop.not_finished}  # fmt: skip
            files.finish(summary, summary_markdown(summary) + stopped_markdown(stop), stop.not_finished, what)
    if sink is None:
        err_console.print(f"{what} after {len(finished)} of {total} variants; nothing is logged (--no-track)",
                          markup=False, soft_wrap=True)  # fmt: skip
        _print_rest(examples, {r.spec.key for r, _ in finished}, rest)
        return
    with contextlib.suppress(Exception):  # the store may be what failed; keep the original error
        tracker = cast("SpoolSink", sink.close())
        done = {e.key for e in tracker.spool.entries()}
        summary = f"# perflab summary\n\nThe suite was {what} after {len(done)} of {total} variants.\n"
        kept = tracker.finish(summary, {"interrupted": interrupted, "n_variants": len(done),
                                        "n_variants_planned": total},
                              failed=True, wait=False, interrupted=interrupted)  # fmt: skip
        where = kept or f"they are logged in MLflow parent run {tracker.parent_run_id}"
        err_console.print(f"{what} after {len(done)} of {total} variants; {where}", markup=False, soft_wrap=True)
        _print_rest(examples, done, rest)


def _print_rest(examples: list[Example], done: set[str], rest: tuple[Path | None, list[str]]) -> None:
    command = rest_command(examples, done, *rest)  # a pair is measured on one machine, in one suite
    if command:
        err_console.print(f"the rest: {command}", markup=False, soft_wrap=True)


def _on_ray(
    examples: list[Example], sink: BackgroundSink | None, on_result: Callable[[VariantResult, Comparison | None], None],
    expected: dict[str, float] | None, ray: str, **options: Any,
) -> SuiteResult:  # fmt: skip
    """The suite on a Ray cluster (bench.isolate.cluster), the longest examples first as on several local workers."""
    from bench.isolate.cluster import run_on_ray
    from bench.record.manifest import host_manifest

    return run_on_ray(examples, ray, sink=sink, on_result=on_result, describe_host=host_manifest, warn=warning,
                      expected_s=expected, **options)  # fmt: skip


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc, 10 ms resolution); None elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = float(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def durations_signature(effective: BenchmarkConfig, cold_start: bool = False) -> str:
    """What the durations of a run are kept under: its device, sizes and launch."""
    return f"device={effective.device} smoke={effective.smoke} cold_start={cold_start}"


def durations_path() -> Path:
    """``$PERFLAB_DURATIONS``, else ``~/.cache/perflab/durations.json``: each variant's last time, the
    order hint for parallel suites (longest first)."""
    env = os.environ.get("PERFLAB_DURATIONS")
    return Path(env) if env else Path.home() / ".cache" / "perflab" / "durations.json"
