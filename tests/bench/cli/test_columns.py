"""bench/cli/output.py's consoles off a terminal, as CI runners start a command: ``COLUMNS`` unset, empty, not a
number, or 0 (a container without a terminal size): every line still printed, without escape codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli.output import new_console

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("columns", ["0", "", "abc", None])
def test_a_console_off_a_terminal_is_80_columns_whatever_columns_says(
    columns: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # COLUMNS=0 gave rich a console 0 wide, which printed nothing: no table, no error, an empty CI log.
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    out = new_console()
    assert out.width == 80
    out.print("ch07:x:optimized failed", markup=False)
    assert capsys.readouterr().out == "ch07:x:optimized failed\n"


def test_an_error_is_printed_at_columns_0(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PERFLAB_CHAPTERS_DIR", "NO_COLOR", "FORCE_COLOR")}
    (tmp_path / "ch07").mkdir()
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "-t", "ch99", "--chapters-dir", str(tmp_path),
                           "--no-track"], cwd=REPO, env={**env, "COLUMNS": "0"}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "ch99" in done.stderr, done.stderr
    assert "\x1b" not in done.stderr + done.stdout


def test_a_failed_variants_line_carries_no_escape_codes_of_its_error(capsys: pytest.CaptureFixture[str]) -> None:
    # A benchmark's exception with colours in it (a library's formatted error) reached a CI log as ^[[31m...
    from bench.cli.common import line
    from bench.define.result import ErrorInfo, VariantResult, VariantSpec

    spec = VariantSpec(chapter="ch07", example="x", variant="optimized", path="/x.py")
    message = "\n\x1b[31mRuntimeError\x1b[0m: bad \x00| pipe\nsecond line"
    failed = VariantResult(spec=spec, status="failed", failed_stage="warmup",
                           error=ErrorInfo(kind="exception", message=message))  # fmt: skip
    new_console().print(line(failed, None, "ch07:"), soft_wrap=True)
    assert capsys.readouterr().out == " failed x:optimized  [warmup] RuntimeError: bad | pipe\n"
