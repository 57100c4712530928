"""perflab/cli.py: one command assembled from bench's commands and those of the packages built on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from perflab.cli import app

REPO = Path(__file__).resolve().parents[2]
COMMANDS = {"run", "ab", "list", "verify", "profile", "selfcheck", "show", "overhead", "import", "compare", "report",
            "regressions", "peak", "readme", "kernels"}  # fmt: skip
GROUPS = {"server", "expectations", "sweep"}


def test_every_subcommand_is_there() -> None:
    commands = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    groups = {g.name for g in app.registered_groups}
    assert commands == COMMANDS and groups == GROUPS
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    assert all(name in out for name in COMMANDS | GROUPS)


def test_python_m_perflab_is_the_command_and_bad_input_is_one_line() -> None:
    env = {**os.environ, "COLUMNS": "300"}  # unwrapped
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "--targets", "ch999", "--no-track"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: unknown chapter 'ch999'") and len(done.stderr.strip().splitlines()) == 1


def test_a_bad_option_value_or_name_is_one_line_naming_it() -> None:
    """click's own usage errors (a value its type refuses, an option that does not exist) are one line naming the
    value as given and the command, status 2; a group alone still prints its help."""
    env = {**os.environ, "COLUMNS": "300"}
    for argv, named in ((["regressions", "--threshold", "abc"], "--threshold 'abc'"),
                        (["run", "--rounds=x", "-t", "ch07"], "--rounds 'x'"),
                        (["run", "--bogus"], "No such option: --bogus")):  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "perflab", *argv], cwd=REPO, capture_output=True, text=True,
                              timeout=120, env=env)  # fmt: skip
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: python -m perflab {argv[0]}: "), done.stderr
        assert named in lines[0] and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "perflab", "sweep"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip
    assert done.returncode == 2 and "Usage:" in done.stdout + done.stderr and "Commands:" in done.stdout + done.stderr


def test_bench_never_imports_the_command() -> None:
    """The dependency points one way: importing the harness (and its CLI) loads no package built on it."""
    code = ("import sys, bench, bench.cli; "
            "print(sorted(m for m in ('perflab', 'analysis', 'sweeps', 'kernels') if m in sys.modules))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    return [path, *(p for name, sub in getattr(command, "commands", {}).items()
                     for p in _command_paths(sub, (*path, name)))]  # fmt: skip


def test_every_help_fits_80_columns_with_every_option_whole() -> None:
    """At 80 columns (a pipe, a CI log) typer's rich panels cut `ab --help`'s option names and words
    ("--timeout-multipli…", "$MLFLOW_TRACKING_U…"); every command's help must wrap instead."""
    import typer.main

    root = typer.main.get_command(app)
    paths = _command_paths(root)
    assert ("ab",) in paths and ("sweep", "run") in paths
    for path in paths:
        out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80).output
        lines = out.splitlines()
        assert lines and all(len(line) <= 80 for line in lines), (path, max(lines, key=len))
        assert "…" not in out, path
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        for param in command.params:
            for opt in (*param.opts, *param.secondary_opts):
                if opt.startswith("-"):
                    assert any(opt in line.replace(",", " ").split() for line in lines), (path, opt)
