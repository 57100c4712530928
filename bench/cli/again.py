"""The options a command was given, as a command line again: what a stopped suite's "the rest:" command repeats so
that the examples left are measured as the others were (device, config, workers, rounds, store, experiment, ...).

Left out: what picks the examples (``-t``, ``perflab ab``'s files, ``--shard``: the rest names its examples) and
``--suite-timeout`` (a time box for one command, not how it measures). ``--out DIR`` becomes a directory beside it
(``DIR-rest``, or ``DIR-rest2`` … where that exists): a suite's files there would replace the first suite's
summary and junit.xml. A URI's credentials (``--tracking-uri https://user:token@host``) are printed redacted: the
command is written to logs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["given_options", "rest_out"]

# What picks the examples, or bounds one command's time: not repeated.
_NOT_REPEATED = frozenset({"targets", "files", "shard", "suite_timeout"})


def given_options(ctx: Any) -> list[str]:
    """The options of the command of ``ctx`` (its ``typer.Context``) that its user gave (on the command line, or by
    an option's environment variable), in the command's order, ready for ``shlex.join``."""
    args: list[str] = []
    for param in ctx.command.params:
        name = param.name or ""
        value = ctx.params.get(name)
        source = ctx.get_parameter_source(name)
        if (param.param_type_name != "option" or name in _NOT_REPEATED or value is None
                or getattr(source, "name", None) not in ("COMMANDLINE", "ENVIRONMENT")):  # fmt: skip
            continue
        if name == "out":
            value = rest_out(Path(value))
        args += _flag(param, value)
    return args


def _flag(option: Any, value: object) -> list[str]:
    """``option`` set to ``value`` as arguments: a switch by its name (``--no-track``; ``--smoke`` or
    ``--full-size``), a valued option by its long name and value (a repeated one, each value)."""
    long = max(option.opts, key=lambda o: (o.startswith("--"), len(o)))
    if option.is_flag and isinstance(value, bool):
        if value:
            return [long]
        return [option.secondary_opts[0]] if option.secondary_opts else []
    from bench.record.manifest import redact_uri

    values = value if isinstance(value, (list, tuple)) else [value]
    return [arg for v in values for arg in (long, redact_uri(str(v)))]  # a store's password never printed


def rest_out(out: Path) -> Path:
    """A directory for the rest's ``--out`` files beside ``out``, none there yet: ``out-rest``, else ``out-rest2`` …"""
    out = out if out.name else out.resolve()  # "." names no directory to be beside
    n = 1
    while (candidate := out.with_name(f"{out.name}-rest{n if n > 1 else ''}")).exists():
        n += 1
    return candidate
