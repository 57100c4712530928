"""bench/cli/workers.py: the worker counts of ``--jobs``: refused below what a command needs, warned about above
the host's usable cores, each in one line naming the count."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from bench.cli import output
from bench.cli.workers import check_count
from bench.errors import PerflabError

REPO = Path(__file__).resolve().parents[3]


def test_a_count_below_the_least_is_refused_and_one_above_the_cores_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.measure.cores

    said = Console(file=io.StringIO(), stderr=True, width=40, soft_wrap=True, color_system=None)
    monkeypatch.setattr(output, "err_console", said)
    monkeypatch.setattr(bench.measure.cores, "usable_cores", lambda: 4)
    for count in (0, -2):
        with pytest.raises(PerflabError, match=rf"^--jobs {count}: accepted: 1 or more parallel workers \(this host "
                                               r"has 4 usable cores\)$"):  # fmt: skip
            check_count("--jobs", count)
    with pytest.raises(PerflabError, match=r"^--jobs 1: accepted: 2 or more"):
        check_count("--jobs", 1, least=2)
    check_count("--jobs", None)
    check_count("--jobs", 4)
    assert said.file.getvalue() == ""  # type: ignore[attr-defined]
    check_count("--jobs", 9)
    assert said.file.getvalue() == (  # type: ignore[attr-defined]
        "warning: --jobs 9: more workers than this host's 4 usable cores; they will share cores\n")


@pytest.mark.parametrize("args", [
    ["run", "-t", "ch7:transpose", "--no-track", "--jobs", "0"],
    ["run", "-t", "ch7:transpose", "--no-track", "--jobs", "-3"],
    ["ab", "chapters/ch07/baseline_transpose.py", "chapters/ch07/optimized_transpose.py", "--no-track", "--jobs", "0"],
    ["overhead", "--n", "0", "--chapter-wall", "ch7", "--jobs", "1"],
])  # fmt: skip
def test_a_bad_count_is_one_line_naming_it_before_anything_runs(args: list[str]) -> None:
    """typer's own bound printed a usage box of four lines that did not name the value ("Input should be greater
    than or equal to 1")."""
    done = subprocess.run([sys.executable, "-m", "perflab", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    value = args[-1]
    assert done.returncode == 2 and done.stderr.startswith(f"error: --jobs {value}: accepted: "), done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == "", done.stderr
