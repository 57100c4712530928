"""``perflab sweep make-data`` and ``perflab sweep run`` (added to the command by ``perflab/cli.py``).

Cheap to import: optuna, mlflow, torch and h5py are imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperCommand

__all__ = ["register"]

LIST_OPTIONS = ("--batch-sizes", "--num-workers", "--grad-accum")


def join_list_values(args: list[str]) -> list[str]:
    """``--batch-sizes 128 256`` as ``--batch-sizes 128,256``: the values typed after a list option (or its
    ``--batch-sizes=128`` form), up to the next option, become one comma-separated value (``128,256`` and
    ``"128 256"`` pass unchanged)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        name, eq, first = args[i].partition("=")
        if name not in LIST_OPTIONS:
            out.append(args[i])
            i += 1
            continue
        values = [first] if eq else []
        i += 1
        while i < len(args) and (not args[i].startswith("-") or args[i][1:].isdigit()):  # -1 is a value to refuse
            values.append(args[i])
            i += 1
        out += [name, ",".join(values)]
    return out


class ListOptionsCommand(TyperCommand):
    """A command whose list options take the forms users type: comma-separated or space-separated."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, join_list_values(args))


sweep_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Optuna sweeps over training configurations")


@sweep_app.command("make-data")
def make_data_cmd(
    path: Annotated[Path, typer.Argument(help="HDF5 file to write")],
    kind: Annotated[str, typer.Option(help="features (MLP presets) or images (cnn: JPEG bytes)")] = "features",
    samples: Annotated[int | None, typer.Option(min=1, help="rows / images (default 178,000 / 4,096)")] = None,
    features: Annotated[int, typer.Option(min=1, help="features per row (features)")] = 64,
    size: Annotated[int, typer.Option(min=8, help="stored image side in pixels (images)")] = 256,
    classes: Annotated[int | None, typer.Option(min=2, help="label classes (default 10 / 100)")] = None,
    seed: Annotated[int, typer.Option(help="generator seed")] = 0,
) -> None:
    """Write a synthetic dataset: 'features' (N, F) float32 + 'labels', or encoded 'images' + 'labels'."""
    from sweeps import data

    if kind == "features":
        info = data.make_data(path, samples or data.DEFAULT_SAMPLES, features, classes or data.DEFAULT_CLASSES, seed)
        typer.echo(f"wrote {info.path}: {info.samples} samples x {info.features} features, {info.classes} classes")
    elif kind == "images":
        info = data.make_images(path, samples or data.IMAGE_SAMPLES, size, classes or data.IMAGE_CLASSES, seed)
        typer.echo(f"wrote {info.path}: {info.samples} JPEG images of {size}x{size}, {info.classes} classes")
    else:
        raise typer.BadParameter(f"--kind {kind!r}: choose features or images")


@sweep_app.command("run", cls=ListOptionsCommand)
def run_cmd(
    workload: Annotated[
        str | None,
        typer.Option(help="built-in (tiny small medium large transformer cnn gpt), my_pkg.train:make or file.py:make"),
    ] = None,
    config: Annotated[str | None, typer.Option("--config", help="YAML with a 'benchmark:' section")] = None,
    data_path: Annotated[
        Path | None, typer.Option("--data-path", help="data file (built-ins: written once under perflab-results/)")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="a built-in workload (same as --workload NAME)")] = None,
    strategy: Annotated[
        str,
        typer.Option(
            help="grid (every configuration), smart (climb to the memory wall) or pareto (TPE, throughput vs memory)"
        ),  # fmt: skip
    ] = "grid",
    n_trials: Annotated[
        int | None, typer.Option(help="measured configurations to reach (default / 0: the whole space)")
    ] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            help="Optuna storage URL, e.g. postgresql://user@host/db shared by workers on several hosts "
            "(default: sqlite perflab-results/optuna.db)"
        ),  # fmt: skip
    ] = None,
    study_name: Annotated[str | None, typer.Option(help="Optuna study; the same (same workload/data) resumes")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="add to a study of this name although it measured something else")
    ] = False,
    batch_sizes: Annotated[str | None, typer.Option("--batch-sizes", help="e.g. 32,64,128 or 32 64 128")] = None,
    num_workers: Annotated[
        str | None, typer.Option("--num-workers", help="e.g. 0,4,8 (default: 0, 2, 4, ... up to the usable cores)")
    ] = None,
    grad_accum: Annotated[str | None, typer.Option("--grad-accum", help="micro-batches per step, e.g. 1,2,4")] = None,
    steps: Annotated[int | None, typer.Option(help="measured steps per trial")] = None,
    warmup: Annotated[int | None, typer.Option(help="untimed warm-up steps per trial")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cuda, cpu")] = None,
    size: Annotated[str | None, typer.Option(help="built-ins: auto (full on a GPU), full, smoke")] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="your current configuration, e.g. batch_size=64,num_workers=2,amp=false (default: "
            "batch 32, 0 workers, fp32)"
        ),  # fmt: skip
    ] = None,
    verify_repeats: Annotated[
        int | None, typer.Option("--verify-repeats", help="fresh runs of the recommended and baseline (0: none)")
    ] = None,
    remeasure_seconds: Annotated[
        float | None,
        typer.Option("--remeasure-seconds", help="each ranking/verification run times at least this long (0: --steps)"),
    ] = None,
    max_memory_gb: Annotated[float | None, typer.Option(help="simulated device memory (GB) for the wall")] = None,
    trial_timeout: Annotated[
        float | None, typer.Option("--trial-timeout", help="seconds before a trial is killed (status timeout)")
    ] = None,
    time_budget: Annotated[
        float | None, typer.Option("--time-budget", help="start no trial after this many seconds; resume later")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="also write the tables and pictures here")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: MLflow's Default)")] = None,
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")] = False,
) -> None:
    """Measure training configurations in isolated trials, recommend one and verify it against yours."""
    from bench.cli import for_terminal, writable_dir
    from sweeps.runner import sweep
    from sweeps.search import check_strategy

    check_strategy(strategy)  # before the trial server's start-up (seconds), not after it
    if out is not None:
        writable_dir(out, "--out")
    result = sweep(  # "" (MLproject's unset parameters): not given
        config=config or None, data_path=data_path, strategy=strategy, n_trials=n_trials or None,
        storage=storage or None, study_name=study_name, out=out, experiment=experiment, track=not no_track,
        echo=lambda text: typer.echo(for_terminal(text)), resume=resume, progress=True,
        overrides={"workload": workload or preset, "batch_sizes": batch_sizes, "num_workers_options": num_workers,
                   "grad_accum_options": grad_accum, "steps_per_test": steps, "warmup_steps": warmup, "device": device,
                   "size": size, "baseline": baseline, "verify_repeats": verify_repeats,
                   "remeasure_seconds": remeasure_seconds,
                   "max_memory_gb": max_memory_gb, "trial_timeout_s": trial_timeout, "time_budget_s": time_budget},
    )  # fmt: skip
    failed = result.conclusion.get("failed")
    if failed:  # no answer to give (a CI pipeline's "tuning failed"); keeping your configuration is an answer: 0
        typer.echo(for_terminal(f"sweep failed (exit status 1): {failed}"))
        raise typer.Exit(1)


@sweep_app.command("replay")
def replay_cmd(
    results: Annotated[
        Path | None, typer.Argument(help="a grid sweep's results.csv (from --out or the MLflow artifact)")
    ] = None,
    storage: Annotated[str | None, typer.Option(help="or read the grid's Optuna study from this storage")] = None,
    study_name: Annotated[str | None, typer.Option(help="the grid's study (with --storage)")] = None,
    seeds: Annotated[int, typer.Option(min=1, help="replay seeds 0..N-1")] = 10,
    within: Annotated[float, typer.Option(help="target: this fraction of the grid's best samples/s")] = 0.05,
    target_frac: Annotated[float, typer.Option(help="the target share of the grid's trials")] = 0.15,
    out: Annotated[Path | None, typer.Option(help="also write replay.md here")] = None,
) -> None:
    """Smart vs grid: replay the smart strategy (and a random order) against a finished grid's measurements."""
    from bench.cli import writable_dir
    from sweeps.replay import load_results, replay, replay_markdown

    if out is not None:
        writable_dir(out, "--out")
    rows = load_results(results, storage, study_name)
    source = str(results) if storage is None else f"study {study_name!r} in {storage}"
    md = replay_markdown(replay(rows, list(range(seeds)), within, source), target_frac)
    typer.echo(md)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "replay.md").write_text(md)


def register(app: Any) -> None:
    app.add_typer(sweep_app, name="sweep")
