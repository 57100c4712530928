"""``perflab sweep make-data`` and ``perflab sweep run`` (registered by bench.cli's plugin hook).

Cheap to import: optuna, mlflow, torch and h5py are imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

sweep_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Optuna sweeps over training configurations")


@sweep_app.command("make-data")
def make_data_cmd(
    path: Annotated[Path, typer.Argument(help="HDF5 file to write")],
    samples: Annotated[int, typer.Option(min=1, help="rows")] = 178_000,
    features: Annotated[int, typer.Option(min=1, help="features per row")] = 64,
    classes: Annotated[int, typer.Option(min=2, help="label classes")] = 10,
    seed: Annotated[int, typer.Option(help="generator seed")] = 0,
) -> None:
    """Write a synthetic dataset: 'features' (N, F) float32, 'labels' (N,) int64."""
    from sweeps.data import make_data

    info = make_data(path, samples, features, classes, seed)
    typer.echo(f"wrote {info.path}: {info.samples} samples x {info.features} features, {info.classes} classes")


@sweep_app.command("run")
def run_cmd(
    config: Annotated[Path | None, typer.Option("--config", help="YAML with a 'benchmark:' section")] = None,
    data_path: Annotated[
        Path | None, typer.Option("--data-path", help="HDF5 data (default: synthetic, made once)")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="tiny, small, medium, large, transformer")] = None,
    strategy: Annotated[
        str, typer.Option(help="grid (every configuration) or smart (climb to the memory wall)")
    ] = "grid",
    n_trials: Annotated[
        int | None, typer.Option(help="finished trials to reach (default / 0: the grid's size)")
    ] = None,
    storage: Annotated[
        str | None, typer.Option(help="Optuna storage URL (default: sqlite optuna.db beside mlflow.db)")
    ] = None,
    study_name: Annotated[str | None, typer.Option(help="Optuna study; an existing one is resumed")] = None,
    batch_sizes: Annotated[str | None, typer.Option("--batch-sizes", help="e.g. 32,64,128")] = None,
    num_workers: Annotated[str | None, typer.Option("--num-workers", help="e.g. 0,2,4")] = None,
    steps: Annotated[int | None, typer.Option(help="measured steps per trial")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cuda, cpu")] = None,
    max_memory_gb: Annotated[float | None, typer.Option(help="simulated device memory (GB) for the wall")] = None,
    trial_timeout: Annotated[
        float | None, typer.Option("--trial-timeout", help="seconds before a trial is killed (status timeout)")
    ] = None,
    time_budget: Annotated[
        float | None, typer.Option("--time-budget", help="start no trial after this many seconds; resume later")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="also write results.csv, recommendation.md/.yaml here")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: perflab)")] = None,
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")] = False,
) -> None:
    """Measure training configurations in isolated trials and recommend one."""
    from sweeps.runner import sweep

    sweep(
        config=config, data_path=data_path, strategy=strategy, n_trials=n_trials or None, storage=storage,
        study_name=study_name, out=out, experiment=experiment, track=not no_track, echo=typer.echo,
        overrides={"preset": preset, "batch_sizes": batch_sizes, "num_workers_options": num_workers,
                   "steps_per_test": steps, "device": device, "max_memory_gb": max_memory_gb,
                   "trial_timeout_s": trial_timeout, "time_budget_s": time_budget},
    )  # fmt: skip


@sweep_app.command("replay")
def replay_cmd(
    results: Annotated[
        Path | None, typer.Argument(help="a grid sweep's results.csv (from --out or the MLflow artifact)")
    ] = None,
    storage: Annotated[str | None, typer.Option(help="or read the grid's Optuna study from this storage")] = None,
    study_name: Annotated[str | None, typer.Option(help="the grid's study (with --storage)")] = None,
    seeds: Annotated[int, typer.Option(min=1, help="replay seeds 0..N-1")] = 10,
    within: Annotated[float, typer.Option(help="target: this fraction of the grid's best samples/s")] = 0.05,
    out: Annotated[Path | None, typer.Option(help="also write replay.md here")] = None,
) -> None:
    """Smart vs grid: replay the smart strategy (and a random order) against a finished grid's measurements."""
    from sweeps.replay import load_results, replay, replay_markdown

    rows = load_results(results, storage, study_name)
    source = str(results) if storage is None else f"study {study_name!r} in {storage}"
    md = replay_markdown(replay(rows, list(range(seeds)), within, source))
    typer.echo(md)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "replay.md").write_text(md)


def register(app: Any) -> None:
    app.add_typer(sweep_app, name="sweep")
