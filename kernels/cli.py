"""``perflab kernels`` (added to the command by ``perflab/cli.py``).

Cheap to import: torch, triton, matplotlib and mlflow load inside the command.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

CASE_MODULES = ("kernels.rmsnorm", "kernels.polynorm")  # importing one registers its cases


def kernels_cmd(
    case: Annotated[
        str, typer.Option(help="comma-separated cases (rms, add_rms, poly, mul_poly, grouped_mul_poly) or 'all'")
    ] = "all",
    dtype: Annotated[str, typer.Option(help="fp16, bf16, fp32 or all")] = "bf16",
    provider: Annotated[
        str, typer.Option(help="comma-separated providers (naive, compiled, triton, compiled_triton) or 'all'")
    ] = "all",
    plot: Annotated[bool, typer.Option("--plot", help="also write a speedup PNG per CSV")] = False,
    profile: Annotated[
        bool, typer.Option("--profile", help="also a torch.profiler Chrome trace per provider, shape and direction")
    ] = False,
    max_shapes: Annotated[
        int | None,
        typer.Option(min=0, help="time at most N shapes per case, spread over the sweep's sizes (0: all)"),
    ] = None,
    save_path: Annotated[
        Path | None,
        typer.Option("--save-path", help="directory for the CSVs and plots (default: perflab-results/kernels)"),
    ] = None,
    smoke: Annotated[
        bool | None, typer.Option("--smoke/--full-size", help="tiny shapes (default: on CPU) or the GPU sweep")
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:N")] = "auto",
    iterations: Annotated[int | None, typer.Option(help="timed calls per provider (default: adaptive)")] = None,
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")] = False,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: MLflow's Default)")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI")] = None,
) -> None:
    """Triton kernel cases vs naive PyTorch and torch.compile, forward and backward, over shapes and dtypes."""
    import importlib
    import os
    import warnings

    import torch

    from bench import resolve_config
    from bench.cli import check_device, progress, writable_dir
    from bench.errors import PerflabError
    from bench.record import results_dir

    resolve_config({"device": device})  # not auto, cpu, cuda or cuda:N: one line naming it
    check_device(device)  # a CUDA device this host lacks: one line, before any import of the kernels
    option = "--save-path" if save_path is not None else "--save-path's default"
    save_path = writable_dir(save_path or results_dir() / "kernels", option)

    dev = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else "cpu" if device == "auto"
                       else device)  # fmt: skip
    interpreted = dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1"
    if interpreted:
        os.environ["TRITON_INTERPRET"] = "1"  # read when @triton.jit decorates, i.e. at the import below
    for name in CASE_MODULES:
        importlib.import_module(name)
    from kernels.case import CASES, DTYPES, PROVIDERS
    from kernels.sweep import CHECK_SHAPES, SMOKE_SHAPES, copy_ceiling, sweep_shapes

    cases = list(CASES) if case == "all" else [c.strip() for c in case.split(",")]
    dtypes = list(DTYPES) if dtype == "all" else [d.strip() for d in dtype.split(",")]
    providers = list(PROVIDERS) if provider == "all" else [p.strip() for p in provider.split(",")]
    for kind, given, known in (("case", cases, CASES), ("dtype", dtypes, DTYPES), ("provider", providers, PROVIDERS)):
        bad = [g for g in given if g not in known]
        if bad:
            raise PerflabError(f"--{kind} {','.join(map(repr, bad))} unknown; choose from {', '.join(known)} or all")
    if interpreted:
        typer.echo("no GPU: Triton kernels run in the interpreter (TRITON_INTERPRET=1); times are not GPU times")
    if "naive" not in providers:
        providers.insert(0, "naive")  # every speedup is against it
    smoke = dev.type == "cpu" if smoke is None else smoke
    max_shapes = max_shapes or None  # 0 (the MLproject default) is the whole sweep
    layer: dict[str, Any] = {"device": str(dev), "smoke": smoke}
    if iterations is not None:
        layer["iterations"] = iterations
    elif smoke:
        layer.update(iterations=3, warmup=1)  # tiny shapes in the interpreter: a number, not a statistic
    config = resolve_config(layer)
    check_shapes = SMOKE_SHAPES[:1] if smoke else CHECK_SHAPES
    hardware, copy_gbps = copy_ceiling(dev)
    typer.echo(f"copy bandwidth of {hardware}: " + (f"{copy_gbps:.1f} GB/s (cached by `perflab peak`)" if copy_gbps
               else "none cached (run `perflab peak` first): GB/s only, % of copy bandwidth '—'"))  # fmt: skip
    params = {"cases": cases, "dtypes": dtypes, "providers": providers, "device": str(dev), "smoke": smoke,
              "max_shapes": max_shapes, "triton_interpret": os.environ.get("TRITON_INTERPRET", "0"),
              "timing_mode": config.timing_mode, "iterations": config.iterations, "hardware": hardware,
              "copy_gbps": f"{copy_gbps:.1f}" if copy_gbps else "none cached"}  # fmt: skip

    smoke_shapes = SMOKE_SHAPES[-max_shapes:] if max_shapes else SMOKE_SHAPES  # the largest kept, as in a sweep
    shapes_of = {c: smoke_shapes if smoke else sweep_shapes(CASES[c], max_shapes) for c in cases}
    total = sum(2 * len(shapes) * len(dtypes) for shapes in shapes_of.values())  # a step: a shape, one direction
    with progress("kernels: shapes", total) as step, warnings.catch_warnings():
        # compiled_triton in the interpreter: dynamo cannot trace it, says so in three multi-line warnings, and
        # the check then records the provider as skipped with the reason, on one line
        warnings.filterwarnings("ignore", "Dynamo does not know how to trace", UserWarning)
        for c in cases:
            _case(
                c,
                shapes_of[c],
                dtypes,
                providers,
                config,
                dev,
                check_shapes,
                save_path,
                plot,
                profile,
                copy_gbps,
                None if no_track else {**params, "experiment": experiment, "tracking_uri": tracking_uri},
                step,
            )


def _case(c: str, shapes: list[Any], dtypes: list[str], providers: list[str], config: Any, dev: Any,
          check_shapes: Any, save_path: Path, plot: bool, profile: bool, copy_gbps: float | None,
          track: dict[str, Any] | None, step: Any) -> None:  # fmt: skip
    """One case over its dtypes: checked, timed, written, logged (``track``: the run's params, and where)."""
    from kernels.case import CASES
    from kernels.sweep import sweep_case, write_outputs

    tracker = None
    if track is not None:
        from kernels.tracking import KernelsTracker

        params = {k: v for k, v in track.items() if k not in ("experiment", "tracking_uri")}
        case_params = {f"{c}.shapes": [str(s) for s in shapes], f"{c}.check_shapes": [str(s) for s in check_shapes]}
        tracker = KernelsTracker(c, {**params, **case_params}, experiment=track["experiment"],
                                 tracking_uri=track["tracking_uri"])  # fmt: skip
    with tracker or contextlib.nullcontext():
        for d in dtypes:
            rows = sweep_case(CASES[c], d, shapes, config, dev, providers, check_shapes=check_shapes,
                              log=lambda line: step(line, advance=0), done=step,
                              profile_dir=save_path / "profile" if profile else None, copy_gbps=copy_gbps)  # fmt: skip
            files = write_outputs(rows, c, d, save_path, plot)
            _report(c, d, rows, say)
            if tracker is not None:
                tracker.log_dtype(d, rows, providers, files)
    say(f"wrote {save_path}")
    if tracker is not None:
        say(f"logged {c} to MLflow run {tracker.parent}")


def say(line: str) -> None:
    """A result line, whole (above the progress bar on a terminal)."""
    from bench.cli import console

    console.print(line, markup=False, soft_wrap=True)


def _report(case: str, dtype_name: str, rows: dict[str, Any], say: Any = typer.echo) -> None:
    """Triton's geomean speedups and what was not timed, per direction; the bandwidth target's line for
    the cases it covers (rms, add_rms forward)."""
    from kernels.sweep import bandwidth_target, geomean

    target = bandwidth_target(case, dtype_name, rows.get("fwd", []))
    if target is not None:
        say(target.line)
    for direction, rs in rows.items():
        key = f"{case}.{dtype_name}.{direction}"
        for against in ("naive", "compiled"):
            gm = geomean(r.speedup(against) for r in rs)
            if gm is not None:
                say(f"{key}: triton vs {against} geomean {gm:.3f}x")
        skipped = {p: why for r in rs for p, why in r.skipped.items()}
        for p, why in skipped.items():
            say(f"{key}: {p} skipped: {why}")


def register(app: Any) -> None:
    app.command("kernels")(kernels_cmd)
