"""The MLproject's entry points: each command, as ``mlflow run`` builds it, parses as a perflab CLI call,
and the ``kernels`` entry point's parameters reach the CLI options of the same name."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from mlflow.projects import _project_spec

from perflab.cli import app

ROOT = Path(__file__).resolve().parents[2]


def _project() -> Any:
    return _project_spec.load_project(str(ROOT))


def _parse(entry_point: str, user_params: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """(CLI command name, its parsed parameters) for the command ``mlflow run . -e <entry_point> -P ...``
    runs, parsed by the perflab CLI but not run."""
    command = _project().get_entry_point(entry_point).compute_command(user_params or {}, None)
    args = shlex.split(command)
    assert args.pop(0) == "perflab", command
    cmd = typer.main.get_command(app)
    while hasattr(cmd, "commands"):  # a group: descend to the subcommand named next
        cmd = cmd.commands[args.pop(0)]
    return str(cmd.name), dict(cmd.make_context(str(cmd.name), args).params)


def test_every_entry_point_parses_with_its_defaults() -> None:
    names = list(_project()._entry_points)
    assert {"main", "chapter", "run", "sweep", "peak", "report", "kernels"} <= set(names)
    for name in names:
        _parse(name)  # an unknown flag or a default the option's type refuses raises here


def test_kernels_parameters_map_to_cli_options() -> None:
    spec = _project().get_entry_point("kernels").parameters
    assert set(spec) == {"case", "dtype", "save_path", "max_shapes"}
    name, params = _parse("kernels")
    assert name == "kernels"
    assert (params["case"], params["dtype"], params["save_path"], params["max_shapes"], params["plot"]) == (
        "all", "bf16", Path("perflab-results/kernels"), 0, True)  # fmt: skip
    given = {"case": "rms,add_rms", "dtype": "fp32", "save_path": "out dir/k", "max_shapes": "6"}
    _, params = _parse("kernels", given)
    assert (params["case"], params["dtype"], params["save_path"], params["max_shapes"]) == (
        "rms,add_rms", "fp32", Path("out dir/k"), 6)  # fmt: skip
    for key in spec:  # every MLproject parameter is the CLI option of the same name
        assert key in params


def test_kernels_max_shapes_must_be_a_count() -> None:
    with pytest.raises(typer.BadParameter):
        _parse("kernels", {"max_shapes": "six"})
