"""bench/cli/again.py: a stopped suite's rest is measured as its suite was: the command's options, repeated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def _context(command: str, args: list[str]) -> Any:
    import typer

    from bench.cli.ab import ab
    from bench.cli.run import run

    app = typer.Typer()
    app.command()(run)
    app.command()(ab)
    return typer.main.get_command(app).commands[command].make_context(command, args)  # type: ignore[attr-defined]


def test_the_rest_repeats_the_options_that_say_how_and_where_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``perflab run``'s and ``perflab ab``'s options as given (an option's environment variable too), in a command
    line: not what picks the examples (``-t``, the files, ``--shard``) nor ``--suite-timeout``; ``--out DIR`` a
    directory beside DIR, not DIR, whose summary and junit.xml the rest's would replace."""
    from bench.cli.again import given_options, rest_out

    out = tmp_path / "ci"
    monkeypatch.setenv("PERFLAB_OVERLAP", "0")
    ctx = _context("run", ["-t", "ch7", "--device", "cpu", "--full-size", "--config", "a b.yaml", "--no-track",
                           "--shard", "0/2", "--suite-timeout", "9", "--out", str(out), "--jobs", "2", "--seed", "3",
                           "--experiment", "nightly", "--tracking-uri", "sqlite:///x.db", "--rounds", "1",
                           "--no-profile", "--cold-start"])  # fmt: skip
    assert given_options(ctx) == [
        "--seed", "3", "--device", "cpu", "--cold-start", "--no-profile", "--full-size", "--config", "a b.yaml",
        "--experiment", "nightly", "--tracking-uri", "sqlite:///x.db", "--no-track", "--jobs", "2", "--no-overlap",
        "--out", str(tmp_path / "ci-rest"), "--rounds", "1"]  # fmt: skip
    monkeypatch.delenv("PERFLAB_OVERLAP")
    assert given_options(_context("ab", ["x.py", "y.py", "--gpus", "0,1", "--smoke"])) == ["--smoke", "--gpus", "0,1"]
    assert given_options(_context("run", [])) == []
    (tmp_path / "ci-rest").mkdir()
    assert rest_out(out) == tmp_path / "ci-rest2"  # the rest of a rest: a directory of its own again
    assert rest_out(Path(".")).name.endswith("-rest")


def test_an_interrupted_suite_without_a_store_names_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    """``--no-track``: Ctrl-C or SIGTERM say that nothing is logged, and, as a tracked suite does, what is left."""
    from bench.cli.run import _end_unfinished
    from bench.define.discovery import Example
    from bench.define.result import VariantResult, VariantSpec

    specs = {x: [VariantSpec(chapter="ch01", example=x, variant=v, path=f"/m/ch01/{v}_{x}.py")
                 for v in ("baseline", "optimized")] for x in "ab"}  # fmt: skip
    examples = [Example("ch01", x, baseline=s[0], optimized=s[1:]) for x, s in specs.items()]
    finished = [(VariantResult(spec=s, status="ok"), None) for s in specs["a"]]
    _end_unfinished(None, examples, True, None, finished, (Path("/m"), ["--device", "cpu", "--no-track"]))  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "interrupted after 2 of 4 variants; nothing is logged (--no-track)\n" in err, err
    assert "the rest: perflab run -t ch01:b --chapters-dir /m --device cpu --no-track\n" in err, err


def test_the_rest_never_prints_a_stores_password() -> None:
    """The rest's command is written to logs: a URI's credentials are redacted, the rest of the URI kept."""
    from bench.cli.again import given_options

    ctx = _context("run", ["--tracking-uri", "https://ci:s3cret@mlflow.example:5000"])
    assert given_options(ctx) == ["--tracking-uri", "https://***redacted***@mlflow.example:5000"]
