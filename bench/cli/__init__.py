"""bench's commands of ``perflab``: ``run``, ``ab``, ``list``, ``verify``, ``profile``, ``show``, ``selfcheck``,
``overhead``, ``server`` and ``import``. The ``perflab`` command itself (``perflab/cli.py``) adds them to one app
beside the commands of the packages built on the harness (analysis, sweeps, kernels); bench never imports those.

* ``run``: a suite from the command line (flags → a config layer, workers, MLflow on a thread); ``report``: what
  it tells at the end (the table, where the time went, ``--out``'s files, a stopped suite's rest); ``deadline``:
  ``--suite-timeout``; ``again``: the options a stopped suite's rest repeats; ``shard``: ``--shard`` and the
  campaign its parts share; ``workers``: one per GPU or job;
* ``ab``: a reference file against candidate files (benchmarks or KernelBench problems), as a chapter pair;
* ``commands``: list, verify, profile, show, server; ``audit``: selfcheck, overhead; ``store``: import;
* ``common``: the options several commands share, one line per variant, a suite's table;
* ``output``: the consoles, one-line errors, progress for long work, output directories checked before the work
  (also for the commands of the packages built on the harness: ``console``, ``err_console``, ``error``,
  ``fitted``, ``name_lines``, ``progress``, ``warning``, ``writable_dir``, ``can_write_in``);
* ``fit``: text fitted to the terminal's width: a line of prose wrapped with a hanging indent (``wrapped``), a
  Markdown report's tables redrawn and its prose wrapped (``fit_tables``, ``for_terminal``; the files keep the
  Markdown).

Invariants: the command process never imports torch (the server's children do the work); every module
here is cheap to import (heavy imports happen inside the commands); bad input is one line naming the bad
value (``bench.errors.PerflabError``, exit status 2).
"""

from __future__ import annotations

from typing import Any

from bench.cli.ab import ab
from bench.cli.audit import overhead, selfcheck
from bench.cli.commands import list_, profile, server_app, show, verify
from bench.cli.fit import fit_tables, for_terminal, wrapped
from bench.cli.output import (
    can_write_in,
    console,
    err_console,
    error,
    fitted,
    name_lines,
    progress,
    warning,
    writable_dir,
)
from bench.cli.run import run
from bench.cli.store import import_
from bench.cli.workers import check_device

__all__ = [
    "can_write_in",
    "check_device",
    "console",
    "err_console",
    "error",
    "fit_tables",
    "fitted",
    "for_terminal",
    "name_lines",
    "progress",
    "register",
    "warning",
    "wrapped",
    "writable_dir",
]


def register(app: Any) -> None:
    """Add bench's commands to ``app`` (a ``typer.Typer``)."""
    app.command()(run)
    app.command()(ab)
    app.command("list")(list_)
    app.command()(verify)
    app.command()(profile)
    app.command()(selfcheck)
    app.command()(show)
    app.command()(overhead)
    app.add_typer(server_app, name="server")
    app.command("import")(import_)
