"""``perflab import DIR``: results a suite kept on disk (its spool) uploaded to an MLflow store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.cli.common import ExperimentOpt
from bench.cli.output import console, err_console


def import_(
    path: Annotated[Path, typer.Argument(help="a spool (perflab-results/spool/<suite>) or a directory of them")],
    tracking_uri: Annotated[
        str | None, typer.Option(help="MLflow tracking URI (default: the one the suite meant to log to)")
    ] = None,
    experiment: ExperimentOpt = None,
) -> None:
    """Upload the results a suite could not log (a store that was down or could not be written); a result
    already in the store is not logged twice."""
    from bench.record.upload import import_spools

    failed = False
    for ok, text in import_spools(path, tracking_uri, experiment):
        if ok:
            console.print(f"uploaded {text}", markup=False, soft_wrap=True)
        else:
            err_console.print(text, markup=False, soft_wrap=True)
            failed = True
    if failed:
        raise typer.Exit(1)
