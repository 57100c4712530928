"""bench/cli/report.py and deadline.py through the command (named apart from tests/analysis/test_report.py):
``perflab run --suite-timeout`` ends the suite at its time with what finished logged and the rest named; ``--out``'s
files hold each variant as the store does; the parent run says where the time went."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow  # a whole command run to its time limit
def test_a_suite_timeout_keeps_what_finished_and_names_the_rest(
    chapters: Callable[[dict[str, dict[str, Any]]], Path], tmp_path: Path
) -> None:
    from mlflow import MlflowClient

    root = chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {},
                     "ch07/baseline_z.py": {"SETUP_SLEEP": 1000.0}, "ch07/optimized_z.py": {}})  # fmt: skip
    uri, out, limit = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "ci", 90
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")} | {"COLUMNS": "300", "NO_COLOR": "1"}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "--chapters-dir", str(root), "--tracking-uri", uri,
                           "--experiment", "ci", "--device", "cpu", "--suite-timeout", str(limit), "--out", str(out),
                           "--timeout-multiplier", "100"],  # z's set-up outlasts the suite, not its own limit
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=limit + 150)  # fmt: skip
    took = time.monotonic() - t0
    assert done.returncode == 124, done.stdout + done.stderr
    assert limit - 1 < took < limit + 60, took  # z asleep in its set-up for 1000 s: stopped at the limit
    said = (f"the suite's time ran out (--suite-timeout {limit} s) after 2 of 4 variants; not finished: "
            "ch07:z:baseline, ch07:z:optimized\nthe rest: perflab run -t ch07:z --device cpu "
            f"--timeout-multiplier 100.0 --experiment ci --tracking-uri {uri} --chapters-dir {root} "
            f"--out {tmp_path / 'ci-rest'}\n")  # fmt: skip
    assert said in done.stderr, done.stderr
    assert re.search(r"stages \(summed over 2 variants\): start [\d.]+ s, set-up", done.stdout), done.stdout

    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["a:optimized"].find("failure") is None and cases["a:optimized"].find("error") is None
    assert "time ran out" in (cases["z:optimized"].find("error").get("message") or "")  # type: ignore[union-attr]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["suite_status"] == "timeout" and summary["not_finished"] == ["ch07:z:baseline", "ch07:z:optimized"]
    assert [t["key"] for t in summary["timeline"]] == ["ch07:a:baseline", "ch07:a:optimized"]

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("ci").experiment_id])
    parent = next(r for r in runs if "perflab.variant" not in r.data.tags)
    assert parent.info.status == "KILLED" and parent.data.tags["perflab.suite_status"] == "timeout"
    for part, seconds in summary["stages_s"].items():  # where the time went, on the parent run
        assert parent.data.metrics[f"stage_{part}_s"] == pytest.approx(seconds)
    assert summary["stages_s"]["measurement"] > 0 and parent.data.metrics["wall_s"] == pytest.approx(summary["wall_s"])
    variant = next(r for r in runs if r.info.run_name == "ch07:a:optimized")
    written = json.loads((out / "ch07" / "a" / "optimized" / "run.json").read_text())
    assert written["metrics"] == pytest.approx(variant.data.metrics)  # on disk as in the store
    assert written["params"] == variant.data.params
    assert {k: v for k, v in variant.data.tags.items() if k in written["tags"]} == written["tags"]


# z's baseline says when it is in its set-up (a's pair over: one worker runs the examples in order), then sleeps there
_MARKS_SETUP = """
_setup = Bench.setup


def _marked_setup(self):
    open({mark!r}, "w").close()
    _setup(self)


Bench.setup = _marked_setup
"""


@pytest.mark.slow  # two whole commands
def test_a_suite_says_how_long_its_last_run_took(
    chapters: Callable[[dict[str, dict[str, Any]]], Path], tmp_path: Path
) -> None:
    """Before its variants, a suite run before says how long that run took (the durations it keeps per device and
    sizes); the first run has nothing to say."""
    root = chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {}})
    env = os.environ | {"COLUMNS": "80", "NO_COLOR": "1", "PERFLAB_DURATIONS": str(tmp_path / "durations.json")}
    command = [sys.executable, "-m", "perflab", "run", "--chapters-dir", str(root), "--no-track", "--device", "cpu"]
    t0 = time.monotonic()
    first = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t0
    second = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert (first.returncode, second.returncode) == (0, 0), second.stdout + second.stderr
    assert "expected:" not in first.stderr + first.stdout
    said = re.search(r"expected: ~(\d+) s from these variants' last run here\n", second.stderr)
    assert said is not None and int(said.group(1)) <= took, (second.stderr, took)  # the variants' share of its wall


def test_a_cut_suites_summary_keeps_the_time_line_of_what_ran(
    chapters: Callable[[dict[str, dict[str, Any]]], Path], tmp_path: Path
) -> None:
    """The suite stopped at its time wrote ``"timeline": []``: where its time went (the workers' times, the output
    checks of the stage split) read nothing for the variants that finished. The deadline is cut at a known point:
    its own alarm (SIGALRM) sent once a's pair is over and z's baseline sleeps in its set-up, not a race with the
    host's speed."""
    import signal

    mark = tmp_path / "z-in-setup"
    root = chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {},
                     "ch07/baseline_z.py": {"SETUP_SLEEP": 1000.0, "extra": _MARKS_SETUP.format(mark=str(mark))},
                     "ch07/optimized_z.py": {}})  # fmt: skip
    out = tmp_path / "ci"
    env = os.environ | {"COLUMNS": "300", "NO_COLOR": "1"}
    with subprocess.Popen([sys.executable, "-m", "perflab", "run", "--chapters-dir", str(root), "--no-track",
                           "--device", "cpu", "--suite-timeout", "600", "--out", str(out),
                           "--timeout-multiplier", "100"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as proc:  # fmt: skip
        try:
            t0 = time.monotonic()
            while not mark.exists() and proc.poll() is None and time.monotonic() - t0 < 240:
                time.sleep(0.1)
            assert mark.exists(), proc.stdout.read() if proc.poll() is not None and proc.stdout else "z never began"
            proc.send_signal(signal.SIGALRM)  # the suite's time is up
            said, _ = proc.communicate(timeout=120)
        finally:
            proc.kill()
    assert proc.returncode == 124, said
    summary = json.loads((out / "summary.json").read_text())
    assert summary["suite_status"] == "timeout" and summary["not_finished"] == ["ch07:z:baseline", "ch07:z:optimized"]
    timeline = summary["timeline"]
    assert [t["key"] for t in timeline] == ["ch07:a:baseline", "ch07:a:optimized"], timeline
    assert [t["start_s"] for t in timeline] == sorted(t["start_s"] for t in timeline)
    assert all(t["run_s"] > 0 and t["end_s"] > t["start_s"] and t["worker"] == 0 for t in timeline), timeline
    assert summary["time_breakdown"]["workers"] == 1 and summary["time_breakdown"]["run_s"] > 0
    compared = sum(t["compare_s"] for t in timeline)  # a's outputs compared: part of the stage split's "checks"
    assert compared > 0 and summary["stages_s"]["checks"] >= compared
    assert summary["stages_s_by_chapter"]["ch07"]["checks"] == pytest.approx(summary["stages_s"]["checks"])
    assert re.search(r"time: 1 worker\(s\), [\d.]+ s running variants", said), said


def test_a_signalled_suites_files_name_what_did_not_finish_and_its_wall(
    chapters: Callable[[dict[str, dict[str, Any]]], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM or Ctrl-C mid-suite (``_end_unfinished``): ``summary.md`` closed without the variants left (its
    "Not finished" section was the suite timeout's only) and both files read a wall of 0.0 s; summary.json keeps the
    time line of what ran."""
    from bench.cli.run import _end_unfinished
    from bench.define.discovery import discover, select
    from bench.record.outdir import OutDir

    root = chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {}, "ch07/baseline_solo.py": {}})
    out = tmp_path / "ci"
    # a round of a, its example unfinished
    ran = {"key": "ch07:a:baseline", "round": 0, "start_s": 0.5, "end_s": 9.0, "run_s": 8.0, "compare_s": 0.0,
           "other_s": 0.5, "ahead_s": 0.0, "late_s": 0.0, "beside": False, "worker": 0}  # fmt: skip
    _end_unfinished(None, select(discover(root)), True, OutDir(out, dict), [], (root, ["--device", "cpu"]), 12.5,
                    [ran])  # fmt: skip
    assert json.loads((out / "summary.json").read_text())["timeline"] == [ran]
    md = (out / "summary.md").read_text()
    assert "wall 12.5 s" in md and "## Not finished" in md, md
    assert "- ch07:a:optimized\n" in md and "- ch07:solo:baseline\n" in md
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("time"), suite.get("tests"), suite.get("errors")) == ("12.500", "2", "2")
    names = {c.get("name") for c in suite.iter("testcase")}
    assert names == {"a:optimized", "solo:baseline"}  # a lone baseline not finished is named too
    assert "interrupted after 0 of 3 variants" in capsys.readouterr().err


def test_a_completed_suites_summary_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """summary.json named how a stopped suite ended and said nothing for one that completed: a CI step's
    ``jq .suite_status`` read null."""
    from bench.cli.report import report_suite
    from bench.define.result import SuiteResult
    from bench.record.outdir import OutDir

    report_suite(SuiteResult(variants=[], comparisons=[], wall_s=1.0), None, None, True, None, OutDir(tmp_path, dict))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["suite_status"], summary["not_finished"]) == ("completed", [])


def test_the_browse_command_pastes_as_it_is_for_a_store_under_a_path_with_a_space() -> None:
    """``browse: mlflow ui --backend-store-uri sqlite:////tmp/sp ace/mlflow.db`` pasted into a shell gave mlflow two
    arguments; the URI is shell-quoted (a server's address is shown as it is)."""
    import shlex

    from bench.cli.report import browse_command

    said = browse_command("sqlite:////tmp/sp ace/mlflow.db")
    assert shlex.split(said) == ["mlflow", "ui", "--backend-store-uri", "sqlite:////tmp/sp ace/mlflow.db"]
    assert browse_command("sqlite:///mlflow.db") == "mlflow ui --backend-store-uri sqlite:///mlflow.db"
    assert browse_command("http://perflab-store:5000") == "http://perflab-store:5000"
