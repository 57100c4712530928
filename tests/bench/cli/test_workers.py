"""bench/cli/workers.py: the worker counts of ``--jobs``: refused below what a command needs, warned about above
the host's usable cores, each in one line naming the count; ``--gpus`` indices the host does not have."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from bench.cli import output, workers
from bench.cli.workers import check_count, check_workers
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
        "warning: --jobs 9: more workers than this host's 4 usable cores; they will share cores\n"
    )


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


def test_gpu_indices_past_the_hosts_gpus_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "cuda_count", lambda: 2)
    assert check_workers("0,1", None, "cuda") == ["0", "1"]
    with pytest.raises(PerflabError, match=r"^--gpus '0,3': this host has 2 CUDA GPU\(s\); accepted: indices 0 to 1$"):
        check_workers("0,3", None, "auto")
    assert check_workers("0,3", None, "cpu") == ["0", "3"]  # CPU workers named as GPUs pin nothing real
    assert check_workers("0,3", None) == ["0", "3"]  # a cluster's GPUs (--ray) are not this host's
    monkeypatch.setattr(workers, "cuda_count", lambda: 0)
    with pytest.raises(PerflabError, match=r"^--gpus '0': this host has no CUDA GPU; on its CPU use --jobs N"):
        check_workers("0", None, "cuda")


def test_gpus_past_the_host_are_refused_before_anything_runs(tmp_path: Path) -> None:
    """``perflab run --gpus 0,9``: one line, exit 2, no suite (on a CPU host: no GPU at all)."""
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "-t", "ch07", "--no-track", "--gpus", "0,9"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--gpus '0,9': this host has" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
