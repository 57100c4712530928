"""``perflab run``: a suite from the command line: flags → config layer, workers, MLflow on a thread, the report.

The command never imports torch (~4 s on a GPU host): the server's children do the work (bench.isolate);
it starts the server first, so that the server's imports overlap everything else the command does.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.text import Text

from bench.cli.common import (
    ChaptersOpt,
    DeviceOpt,
    EnergyOpt,
    ExperimentOpt,
    NcuPresetOpt,
    NoTrackOpt,
    ProfileModeOpt,
    SmokeOpt,
    TargetsOpt,
    TimeoutOpt,
    chapter_prefix,
    cli_layer,
    energy_table,
    examples_for,
    line,
    table,
)
from bench.cli.output import console, err_console, progress
from bench.cli.shard import campaign_tags, shard_of
from bench.define.config import BenchmarkConfig, load_config_file, resolve_config
from bench.define.discovery import Example
from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.errors import PerflabError

if TYPE_CHECKING:
    from bench.isolate.sink import BackgroundSink
    from bench.record.upload import SpoolSink

IterationsOpt = Annotated[int | None, typer.Option(help="timed calls per variant")]
WarmupOpt = Annotated[int | None, typer.Option(help="untimed calls before measurement")]
SeedOpt = Annotated[int | None, typer.Option(help="seed for random/numpy/torch/CUDA")]
ReproducibleOpt = Annotated[bool, typer.Option("--reproducible", help="deterministic algorithms")]
ColdStartOpt = Annotated[
    bool,
    typer.Option(
        "--cold-start",
        help="a brand-new interpreter per variant (cold numbers) instead of a fork of the pre-warmed server",
    ),
]
ProfileOpt = Annotated[
    bool | None,
    typer.Option("--profile/--no-profile", help="profile each variant after its timed run, in a separate child"),
]
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
JobsOpt = Annotated[int | None, typer.Option(min=1, help="parallel workers for CPU-only runs")]
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
OverlapOpt = Annotated[
    bool,
    typer.Option(
        "--overlap/--no-overlap",
        envvar="PERFLAB_OVERLAP",
        help="start each variant's child (start-up, CUDA context) while the previous one on its GPU checks "
        "its outputs and exits; held before setup() until that child is gone (never during a measurement)",
    ),
]


def run(
    targets: TargetsOpt = None, iterations: IterationsOpt = None, warmup: WarmupOpt = None, seed: SeedOpt = None,
    device: DeviceOpt = None, timeout_multiplier: TimeoutOpt = None, reproducible: ReproducibleOpt = False,
    cold_start: ColdStartOpt = False, profile: ProfileOpt = None, profile_mode: ProfileModeOpt = None,
    ncu_preset: NcuPresetOpt = None, smoke: SmokeOpt = None, warm_cache: WarmCacheOpt = False,
    timing_mode: TimingModeOpt = None, noise_target: NoiseOpt = None, config: ConfigOpt = None,
    experiment: ExperimentOpt = None, tracking_uri: TrackingUriOpt = None, no_track: NoTrackOpt = False,
    chapters_dir: ChaptersOpt = None, keep_workdir: KeepOpt = None, gpus: GpusOpt = None, jobs: JobsOpt = None,
    overlap: OverlapOpt = True, ray: RayOpt = None, shard: ShardOpt = None, energy: EnergyOpt = False,
) -> None:  # fmt: skip
    """Measure baseline and optimized variants, verify outputs, log every variant to MLflow."""
    suite_layer = load_config_file(config) if config else None
    layer = cli_layer(
        iterations=iterations, warmup=warmup, seed=seed, device=device, timeout_multiplier=timeout_multiplier,
        deterministic=True if reproducible else None,
        enable_profiling=True if profile is None and profile_mode is not None else profile,
        profile_mode=profile_mode, ncu_preset=ncu_preset, smoke=smoke, flush_l2=False if warm_cache else None,
        timing_mode=timing_mode, noise_target=noise_target, measure_energy=True if energy else None,
    )  # fmt: skip
    effective = resolve_config(suite_layer, layer)  # reject bad flags before anything starts
    if not no_track:
        from bench.record.store import check_tracking_uri
        from bench.record.upload import store_wait_s

        check_tracking_uri(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"))
        store_wait_s()
    catalog, examples = examples_for(targets, chapters_dir)
    for orphan in catalog.orphans:
        err_console.print(Text.assemble(("warning:", "yellow"), f" {orphan} has no baseline_ partner; skipped"))
    if not examples:
        raise PerflabError(f"no examples found under {catalog.root}")
    check_workers(gpus, jobs)
    if ray is not None and (gpus is not None or jobs is not None or shard is not None):
        raise PerflabError("--ray places the examples on the cluster's GPUs itself: without --gpus, --jobs or --shard")
    if ray is not None:
        from bench.isolate.cluster import check_ray

        check_ray(ray)  # before the suite's parent run: a wrong address leaves nothing in the store
    tags = campaign_tags(shard, examples, effective)  # before the split: every part derives the same id
    examples = shard_of(examples, shard) if shard is not None else examples
    if not cold_start and ray is None:
        from bench.isolate.process import prestart_server

        # First: the server's imports (torch) overlap everything below, the MLflow start-up included.
        prestart_server(effective)
    workers = workers_for(effective.device, gpus, jobs) if ray is None else []
    target_text = ",".join(targets or ["all"])
    sink = None if no_track else _sink(experiment, tracking_uri, target_text, cold_start, tags)
    options = {"ray": ray, "chapters_dir": chapters_dir} if ray is not None else {
        "workdir": keep_workdir, "keep_workdir": keep_workdir is not None}  # fmt: skip
    suite, before_s = _run(examples, effective, workers, sink, suite_layer=suite_layer, cli_layer=layer,
                           cold_start=cold_start, overlap=overlap, **options)  # fmt: skip
    tracker = cast("SpoolSink", sink.close()) if sink is not None else None
    logged = _report(suite, tracker, sink, cold_start or ray is not None, before_s)  # --ray: no server here ran them
    if not suite.all_ok or not logged:
        raise typer.Exit(1)


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
    **options: object,
) -> tuple[SuiteResult, float | None]:  # fmt: skip
    """``run_suite`` with a progress bar and a line per variant, and how long after the command's start it began;
    the durations kept for the next run's order."""
    from bench.isolate.suite import load_durations, run_suite, save_durations

    durations = durations_path()
    signature = f"device={effective.device} smoke={effective.smoke} cold_start={options['cold_start']}"
    expected = load_durations(durations, signature) if len(workers) > 1 or options.get("ray") else None
    prefix = chapter_prefix([e.target for e in examples])
    total = sum(len(e.variants) for e in examples)
    with progress(f"{prefix.rstrip(':') or 'suite'}: variants", total) as report:

        def on_result(result: VariantResult, comparison: Comparison | None) -> None:
            report(line(result, comparison, prefix))

        before_s = process_age_s()  # interpreter start, imports, discovery, server and MLflow threads started
        try:
            if options.get("ray") is not None:
                suite = _on_ray(examples, sink, on_result, expected, **options)
            else:
                suite = run_suite(examples, sink=sink, on_result=on_result, workers=workers, expected_s=expected,
                                  **options)  # type: ignore[arg-type]  # fmt: skip
        except BaseException as exc:
            _end_unfinished(sink, examples, interrupted=isinstance(exc, KeyboardInterrupt))
            raise
    save_durations(durations, signature, suite)
    return suite, before_s


def _end_unfinished(sink: BackgroundSink | None, examples: list[Example], interrupted: bool) -> None:
    """A suite that did not end (Ctrl-C, SIGTERM or SIGHUP: ``interrupted``; else an error): the variants that
    finished are logged, the parent run ended (KILLED, ``perflab.suite_status`` ``interrupted``; or FAILED), and
    one line says how many and where they are, a second the command that runs the examples left."""
    what = "interrupted" if interrupted else "stopped by an error"
    total = sum(len(e.variants) for e in examples)
    if sink is None:
        err_console.print(f"{what}; nothing is logged (--no-track)", markup=False, soft_wrap=True)
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
        left = [e.target for e in examples if any(v.key not in done for v in e.variants)]
        if left:  # an example half done runs again whole: a pair is measured on one machine, in one suite
            err_console.print(f"the rest: perflab run -t {','.join(left)}", markup=False, soft_wrap=True)


def _on_ray(
    examples: list[Example], sink: BackgroundSink | None, on_result: Callable[[VariantResult, Comparison | None], None],
    expected: dict[str, float] | None, ray: str, **options: Any,
) -> SuiteResult:  # fmt: skip
    """The suite on a Ray cluster (bench.isolate.cluster), the longest examples first as on several local workers."""
    from bench.isolate.cluster import run_on_ray
    from bench.record.manifest import host_manifest

    def warn(text: str) -> None:
        err_console.print(Text.assemble(("warning:", "yellow"), f" {text}"), soft_wrap=True)

    return run_on_ray(examples, ray, sink=sink, on_result=on_result, describe_host=host_manifest, warn=warn,
                      expected_s=expected, **options)  # fmt: skip


def _report(
    suite: SuiteResult, tracker: SpoolSink | None, sink: BackgroundSink | None, cold_start: bool, before_s: float | None
) -> bool:
    """The summary on the parent run, the table, and where the time went; False when the results could not be
    logged (they are kept on disk, and one line says where)."""
    from bench.record.summary import counts_text, summary_dict, summary_markdown

    summary = summary_dict(suite)
    spooled = tracker.finish(summary_markdown(summary), summary, failed=False) if tracker is not None else None
    if suite.comparisons:
        console.print(table(suite))
    energy = energy_table(suite)
    if energy is not None:
        console.print(energy)
    console.print(
        f"{summary['n_variants_ok']}/{summary['n_variants']} variants ok, "
        f"{summary['n_pairs_verified']}/{summary['n_pairs']} pairs verified in {suite.wall_s:.1f} s",
        markup=False,
    )
    if summary["n_pairs_verified"]:
        console.print(f"verified pairs: {counts_text(summary)}", markup=False)
    if tracker is not None and not spooled:  # bench.audit.wall reads the id back from this line
        console.print(f"MLflow parent run {tracker.parent_run_id} in experiment {tracker.experiment_name!r}",
                      markup=False)  # fmt: skip
        uri = tracker.tracking_uri
        browse = uri if uri.startswith(("http:", "https:")) else f"mlflow ui --backend-store-uri {uri}"
        console.print(f"  browse: {browse}", markup=False, soft_wrap=True)
    for text in time_lines(suite, sink, cold_start, before_s):
        console.print(text, markup=False)
    if spooled:
        err_console.print(spooled, markup=False, soft_wrap=True)
    return not spooled


def time_lines(suite: SuiteResult, sink: BackgroundSink | None, cold_start: bool, before_s: float | None) -> list[str]:
    """Where a suite's time went, a short line each: the workers, the start, host-bound waits, children started
    ahead, MLflow, the server."""
    out = []
    b = suite.time_breakdown()
    if b:
        beside = f" ({b['compare_beside_s']:.1f} s beside the next)" if b["compare_beside_s"] >= 0.05 else ""
        out.append(f"time: {b['workers']} worker(s), {b['run_s']:.1f} s running variants, {b['compare_s']:.1f} s "
                   f"checking outputs{beside}, {b['idle_s']:.1f} s idle")  # fmt: skip
        began = f"the suite began {before_s:.2f} s after the command started; " if before_s is not None else ""
        out.append(f"  {began}variant 1 at {b['first_start_s']:.1f} s")
        if suite.cluster_s:
            c = suite.cluster_s
            out.append(f"  Ray: joined the cluster in {c['connect_s']:.1f} s before the suite, left it in "
                       f"{c['shutdown_s']:.1f} s after")  # fmt: skip
        if b.get("alone_wait_s", 0.0) >= 0.05:
            out.append(f"  host-clocked variants waited {b['alone_wait_s']:.1f} s to run alone on the host")
        if b["ahead_s"] >= 0.05:
            out.append(f"  children started ahead ran {b['ahead_s']:.1f} s beside the previous variant "
                       f"({b['late_s']:.1f} s late)")  # fmt: skip
    if sink is not None and sink.ready_s is not None and sink.wait_s is not None:
        out.append(f"  MLflow opened in {sink.ready_s:.1f} s beside the variants, logged {sink.wait_s:.1f} s after "
                   "the last")  # fmt: skip
    if not cold_start:
        from bench.isolate import server

        out.append(
            "  server: started by this command (its imports delayed the first variant)"
            if server.STARTED_HERE
            else "  server: kept from an earlier command (`perflab server stop` ends it)"
        )
    return out


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


def durations_path() -> Path:
    """``$PERFLAB_DURATIONS``, else ``~/.cache/perflab/durations.json``: each variant's last time, the
    order hint for parallel suites (longest first)."""
    env = os.environ.get("PERFLAB_DURATIONS")
    return Path(env) if env else Path.home() / ".cache" / "perflab" / "durations.json"


def check_workers(gpus: str | None, jobs: int | None) -> list[str] | None:
    """The GPU indices of ``--gpus`` (None without it); errors in the flags, before anything starts."""
    if gpus is None:
        return None
    ids = [g.strip() for g in gpus.split(",") if g.strip()]
    if not ids or not all(g.isdigit() for g in ids):
        raise PerflabError(f"--gpus {gpus!r} is not a comma-separated list of GPU indices such as '0,1'")
    if jobs is not None:
        raise PerflabError("--gpus and --jobs exclude each other: --gpus runs one worker per GPU")
    return ids


def workers_for(device: str, gpus: str | None, jobs: int | None) -> list[dict[str, str]]:
    """One environment per worker: pinned to a GPU each, or plain CPU jobs."""
    ids = check_workers(gpus, jobs)
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
    from bench.isolate.process import cuda_available, cuda_likely, nvml_gpu_count

    if not cuda_likely():
        return 0
    count = nvml_gpu_count()
    if count is not None:
        return count
    if not cuda_available():
        return 0
    import torch

    return torch.cuda.device_count()
