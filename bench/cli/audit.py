"""``perflab selfcheck`` (the clocks against ground truth) and ``perflab overhead`` (the cost of isolation, and a
chapter's wall on one worker against several)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.cli.common import ChaptersOpt, ExperimentOpt, NoTrackOpt, console, emit, examples_for
from bench.cli.fit import wrapped
from bench.cli.output import writable_dir
from bench.define.config import load_config_file
from bench.errors import PerflabError


def selfcheck(
    repeats: Annotated[int, typer.Option(min=2, help="measurements per mode and workload (CV is over these)")] = 7,
    workload: Annotated[
        list[str] | None,
        typer.Option("--workload", help="tiny_add, scale_8mib, scale_64mib, matmul_bf16, cpu_sum (default: all)"),
    ] = None,
    mode: Annotated[
        list[str] | None,
        typer.Option(
            "--mode",
            help="naive, cpu, cuda_event, cuda_graph, triton, pytorch (default: all a workload "
            "can use; cpu_sum: cpu, pytorch)",
        ),  # fmt: skip
    ] = None,
    ncu: Annotated[bool, typer.Option("--ncu/--no-ncu", help="also compare with Nsight Compute when on PATH")] = True,
    out: Annotated[Path | None, typer.Option(help="write selfcheck.md and selfcheck.json here")] = None,
    no_track: NoTrackOpt = False,
    experiment: ExperimentOpt = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="timing settings to check instead of the defaults (a config file)")
    ] = None,
    in_process: Annotated[
        bool, typer.Option("--in-process", help="measure everything in this process (default: each cell fresh)")
    ] = False,
) -> None:
    """Time known workloads with every timing mode and compare each with ground truth."""
    from bench.audit.selfcheck import markdown, run_selfcheck

    layer = load_config_file(config) if config else None
    if out is not None:
        writable_dir(out, "--out")
    try:
        report = run_selfcheck(
            repeats=repeats,
            workloads=workload,
            modes=mode,
            use_ncu=ncu,
            log=lambda text: console.print(wrapped(text, console.width), markup=False, soft_wrap=True),  # "[flush]"
            config_layer=layer,
            isolate=not in_process,
        )
    except ValueError as exc:
        raise PerflabError(str(exc)) from None
    text = markdown(report)
    emit(text, report, out, "selfcheck")
    if not no_track:
        run_id = _log_selfcheck(report, text, {"repeats": repeats, **(layer or {})}, experiment)
        console.print(f"logged to MLflow run {run_id}")


def _log_selfcheck(report: dict[str, Any], text: str, params: dict[str, Any], experiment: str | None) -> str:
    from bench.record.store import log_run

    metrics = {}
    for c in report["cells"]:
        key = f"{c['workload']}.{c['mode']}"
        metrics[f"{key}.median_us"] = c["median_ms"] * 1e3
        metrics[f"{key}.error_pct"] = c["error_pct"]
        if c["cv_pct"] is not None:
            metrics[f"{key}.cv_pct"] = c["cv_pct"]
    return log_run(
        "perflab selfcheck",
        params={"device": report["device"], "torch": report["torch"], **params},
        metrics=metrics,
        artifacts={"selfcheck.md": text, "selfcheck.json": json.dumps(report, indent=2)},
        tags={"perflab.kind": "selfcheck"},
        experiment=experiment,
    )


def overhead(
    n: Annotated[int, typer.Option("--n", min=0, help="trivial variants per launch path, 2 or more (0: skip)")] = 10,
    out: Annotated[Path | None, typer.Option(help="also write overhead.md and overhead.json here")] = None,
    chapter_wall: Annotated[
        str | None,
        typer.Option(help="also time `perflab run -t TARGET` on one worker vs all (--gpus, else --jobs)"),
    ] = None,
    gpus: Annotated[str | None, typer.Option(help="with --chapter-wall: GPU indices (default: every visible)")] = None,
    jobs: Annotated[int | None, typer.Option(help="with --chapter-wall on the CPU: parallel jobs, 2 or more")] = None,
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
    from bench.audit.overhead import markdown, run_overhead
    from bench.audit.wall import chapter_wall as time_walls
    from bench.audit.wall import chapter_wall_markdown

    if n == 1:
        raise PerflabError("--n 1 is too small; use at least 2 variants per path, or 0 to skip")
    if n == 0 and chapter_wall is None:
        raise PerflabError("--n 0 skips the launch paths and no --chapter-wall was given: nothing to measure; use "
                           "--n 2 or more, or --chapter-wall TARGET")  # fmt: skip
    if out is not None:
        writable_dir(out, "--out")
    extra = [*(["--smoke"] if smoke else ["--full-size"] if smoke is False else [])]
    extra += ["--chapters-dir", str(chapters_dir)] if chapters_dir else []
    # the chapter wall's target and workers checked before anything is timed
    plan = _wall_plan(chapter_wall, gpus, jobs, extra, chapters_dir) if chapter_wall is not None else None
    if n:
        report = run_overhead(n, fresh_server=fresh_server)
        emit(markdown(report), report, out, "overhead")
    if plan is None:
        return
    store = out / "chapter_wall.db" if out is not None else None  # the runs' MLflow store, kept with --out
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    wall = time_walls(*plan, store, repeats=repeats)
    emit(chapter_wall_markdown(wall), wall, out, "chapter_wall")


def _wall_plan(
    target: str, gpus: str | None, jobs: int | None, extra: list[str], chapters_dir: Path | None
) -> tuple[str, list[str], str, list[str]]:
    """``chapter_wall``'s first arguments for ``perflab run -t target`` on one worker and on several: ``--jobs`` on
    the CPU, else one worker per GPU. An unknown target or too few GPUs: the PerflabError, before anything runs."""
    from bench.cli.run import workers_for
    from bench.cli.workers import check_count

    examples_for([target], chapters_dir)  # an unknown target: `perflab run`'s error, naming what exists
    if jobs is not None and gpus is None:
        check_count("--jobs", jobs, least=2)  # one worker against several
        return target, [str(i) for i in range(jobs)], "--jobs", [*extra, "--device", "cpu"]
    # --gpus parsed (and refused beside --jobs) as `perflab run` does; without it, every visible GPU
    ids = [env["CUDA_VISIBLE_DEVICES"] for env in workers_for("cuda", gpus, jobs) if "CUDA_VISIBLE_DEVICES" in env]
    if gpus is None and not ids:
        raise PerflabError("--chapter-wall: no GPU visible here; pass --jobs K (K >= 2) to compare CPU workers")
    if len(ids) < 2:
        raise PerflabError(
            f"--chapter-wall compares one worker with several: --gpus {gpus or ','.join(ids)!r} names "
            f"{len(ids)} GPU(s); pass at least two GPU indices (e.g. 0,1), or --jobs K on the CPU"
        )
    return target, ids, "--gpus", extra
