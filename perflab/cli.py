"""The ``perflab`` command: one typer app assembled from each package's ``register(app)``.

Each package's command module is cheap to import (heavy modules load inside its commands), so ``perflab
--help`` and ``perflab run`` start fast; the run command imports neither torch nor mlflow on its main thread.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.markup import escape

import analysis.cli
import bench.cli
import kernels.cli
import sweeps.cli
from bench.cli.output import new_console
from bench.errors import PerflabError

# click's plain help, not typer's rich panels: below ~100 columns those cut option names and words
# ("--timeout-multipli…", "$MLFLOW_TRACKING_U…") and take "[ray]" in a help text for markup; click's wraps at any width
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="perflab: honest baseline vs optimized benchmarks")  # fmt: skip
for package in (bench.cli, analysis.cli, sweeps.cli, kernels.cli):
    package.register(app)


def main() -> None:
    """The ``perflab`` command. Ends with ``os._exit`` once the atexit handlers ran: tearing down the
    interpreter with torch, mlflow and SQLAlchemy loaded costs ~1.3 s here (seconds on a GPU host) and
    saves nothing (files are written and closed, runs are committed, children are gone)."""
    import atexit
    import os

    _stop_on_signals()
    if os.environ.get("COLUMNS", "unset").strip("0 ") == "":
        del os.environ["COLUMNS"]  # COLUMNS=0 (a container without a terminal size): rich's tracebacks print nothing
    try:
        code: int | str | None = _invoke()
    except KeyboardInterrupt:  # Ctrl-C, or a signal made one (the command said what it kept)
        code = 130
    except PerflabError as exc:
        # soft_wrap: one line, never cut
        new_console(stderr=True).print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        code = 2
    except SystemExit as exc:  # typer's own exit (the command's code, usage errors)
        code = exc.code
    if isinstance(code, str):  # sys.exit("message"): printed, status 1, as the interpreter would
        print(code, file=sys.stderr)
        code = 1
    if code == 2 and os.environ.get("MLFLOW_RUN_ID"):  # bad input under `mlflow run`: no FAILED run for a typo
        _discard_project_run(os.environ["MLFLOW_RUN_ID"])
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def _invoke() -> int:
    """The app, with click's usage errors as one line naming the value given (click's own print a usage block and
    "Invalid value for '--threshold': Input should be a valid number", not the value), status 2 as click's."""
    click = _click_exceptions()
    no_args = getattr(click, "NoArgsIsHelpError", ())  # click >= 8.2
    try:
        returned = app(standalone_mode=False)
    except Exception as exc:
        if no_args and isinstance(exc, no_args):  # `perflab` or a group alone: its help, as click prints it
            exc.show()
            return exc.exit_code
        if isinstance(exc, click.UsageError):
            line = escape(usage_line(exc, sys.argv[1:]))
            new_console(stderr=True).print(f"[red]error:[/] {line}", soft_wrap=True)
            return exc.exit_code
        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, typer.Abort):  # click's own Ctrl-C
            raise KeyboardInterrupt from None
        raise
    return returned if isinstance(returned, int) else 0


def _click_exceptions() -> Any:
    """The exceptions module of the click typer runs on (its own copy since typer 0.23, click before)."""
    return sys.modules[typer.BadParameter.__module__]


def usage_line(exc: Any, argv: list[str]) -> str:
    """``exc`` (a click UsageError) on one line: the command, what was wrong (for a bad option value, the value as
    given, found in ``argv``), and where the accepted values are listed."""
    click = _click_exceptions()
    path = exc.ctx.command_path if exc.ctx is not None else "perflab"
    message = exc.format_message()
    param = getattr(exc, "param", None)
    if isinstance(exc, click.BadParameter) and param is not None:
        given = _given(getattr(param, "opts", []), argv)
        if given is not None and repr(given) not in message and given not in message:
            hint = "/".join(getattr(param, "opts", [])) or param.name
            message = f"{hint} {given!r}: {exc.message}"
    return f"{path}: {message.rstrip('.')} (see {path} --help)"


def _given(opts: list[str], argv: list[str]) -> str | None:
    """The value ``argv`` gave the option named by ``opts`` (its last use), or None."""
    found = None
    for i, token in enumerate(argv):
        for opt in opts:
            if token == opt and i + 1 < len(argv):
                found = argv[i + 1]
            elif opt.startswith("--") and token.startswith(opt + "="):
                found = token[len(opt) + 1 :]
    return found


def _discard_project_run(run_id: str) -> None:
    """The run ``mlflow run`` opened for a command that refused its input: deleted once ``mlflow run`` has ended it,
    when nothing was logged to it (bench.record.store.discard_refused_run), by a process of its own, detached:
    ``mlflow run`` ends the run only after this command has exited."""
    import subprocess
    from pathlib import Path

    import bench

    code = "import sys; from bench.record.store import discard_refused_run; discard_refused_run(sys.argv[1])"
    subprocess.Popen([sys.executable, "-c", code, run_id], cwd=Path(bench.__file__).resolve().parents[1],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)  # fmt: skip
    new_console(stderr=True).print(
        f"nothing ran: the MLflow run {run_id} that `mlflow run` opened is deleted once it ends",
        markup=False,
        soft_wrap=True,
    )


def _stop_on_signals() -> None:
    """SIGTERM (``timeout``, Slurm's preemption, ``kill``) and SIGHUP (a closed terminal) stop a command as Ctrl-C
    does, so it logs what it measured and ends its MLflow runs instead of dying with them left RUNNING. A signal
    the command was started with ignored (``nohup``) stays ignored."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, signal.default_int_handler)


if __name__ == "__main__":
    main()
