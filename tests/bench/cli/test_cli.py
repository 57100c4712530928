"""The ``perflab`` command (perflab/cli.py over bench/cli/), run the way users run it (``python -m perflab`` → main)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from perflab.cli import app

REPO = Path(__file__).resolve().parents[3]

TREE: dict[str, dict[str, Any]] = {
    "ch07/baseline_x.py": {},
    "ch07/optimized_x.py": {},
    "ch07/optimized_x_fast.py": {},
    "ch07/baseline_bad.py": {"FAULT": ("setup", "raise")},
    "ch07/optimized_bad.py": {},
    "ch07/baseline_wrong.py": {},
    "ch07/optimized_wrong.py": {"SCALE": 3.0},
    "ch07/baseline_solo.py": {},
    "ch07/optimized_orphan.py": {},  # no baseline_orphan.py
    "ch1/baseline_w.py": {},
    "ch1/optimized_w.py": {},
}


@pytest.fixture
def tree(chapters: Callable[[dict[str, dict[str, Any]]], Path]) -> Path:
    return chapters(TREE)


def perflab(*args: str | Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}  # wide: no wrapped paths or names
    env.pop("PERFLAB_CHAPTERS_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "perflab", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_list_with_cli_runner(tree: Path) -> None:
    result = CliRunner().invoke(app, ["list", "--chapters-dir", str(tree)])
    assert result.exit_code == 0, result.output
    out = result.output.replace("\n", "")  # CliRunner's console is 80 columns wide: long paths wrap
    for target in ("ch01:w", "ch07:x", "ch07:bad", "ch07:solo"):
        assert target in out
    assert "optimized_fast" in out
    assert "no optimized partner" in out  # ch07:solo
    assert "optimized_orphan.py" in out


def test_list_gives_each_example_its_last_runs_seconds(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The durations a plain ``perflab run`` kept here: an example's seconds where each of its variants has some,
    and the line of what the listed examples took."""
    from bench.cli.run import durations_signature
    from bench.define.config import resolve_config

    durations = tmp_path / "durations.json"
    monkeypatch.setenv("PERFLAB_DURATIONS", str(durations))
    times = {"ch07:x:baseline": 2.0, "ch07:x:optimized": 1.5, "ch07:x:optimized_fast": 0.5, "ch01:w:baseline": 3.0}
    durations.write_text(json.dumps({durations_signature(resolve_config()): times, "device=cuda": {"ch07:bad:x": 9}}))
    result = CliRunner().invoke(app, ["list", "--chapters-dir", str(tree)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines() if line.startswith("ch")}
    assert "4.0" in rows["ch07:x"] and "3.0" not in rows["ch01:w"], rows  # ch01:w's optimized never timed
    assert ("expected: ~7 s from these variants' last run here; 6 of 10 not timed before, not counted (`perflab "
            "run` without flags)") in result.output  # fmt: skip
    durations.unlink()
    result = CliRunner().invoke(app, ["list", "--chapters-dir", str(tree)], env={"COLUMNS": "200"})
    assert "last run s" not in result.output and "expected:" not in result.output


def test_list_names_the_directory_it_read(tree: Path, tmp_path: Path) -> None:
    """``--chapters-dir`` as given and as resolved, the counts; a directory with no chapter says what it holds
    and what a chapter is, on one line, exit status 2."""
    link = tmp_path / "mine"
    link.symlink_to(tree)
    done = perflab("list", "--chapters-dir", link)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].strip() == f"5 example(s), 10 variant(s) under {tree.resolve()} " \
        f"(--chapters-dir {link})"  # fmt: skip
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "baseline_x.py").write_text("")
    (flat / "optimized_x.py").write_text("")
    done = perflab("list", "--chapters-dir", flat)
    assert done.returncode == 2 and not done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"no example under {flat}" in lines[0]
    assert "2 Python file(s) (baseline_x.py, optimized_x.py)" in lines[0] and "chNN/ directory" in lines[0]


def test_list_targets_filter(tree: Path) -> None:
    done = perflab("list", "--chapters-dir", tree, "--targets", "ch1")
    assert done.returncode == 0, done.stderr
    assert "ch01:w" in done.stdout and "ch07:x" not in done.stdout


def test_unknown_chapter_exits_nonzero_listing_chapters(tree: Path) -> None:
    done = perflab("run", "--targets", "ch99", "--no-track", "--chapters-dir", tree)
    assert done.returncode == 2
    assert "error:" in done.stderr and "Traceback" not in done.stderr
    assert "'ch99'" in done.stderr and "ch01" in done.stderr and "ch07" in done.stderr


def test_unknown_example_lists_examples(tree: Path) -> None:
    done = perflab("run", "--targets", "ch7:xx", "--no-track", "--chapters-dir", tree)
    assert done.returncode == 2
    assert "examples there: x," in done.stderr  # closest first


def test_invalid_flag_value_names_the_field(tree: Path) -> None:
    done = perflab("run", "--iterations", "0", "--no-track", "--chapters-dir", tree)
    assert done.returncode == 2
    assert "error:" in done.stderr and "iterations=0" in done.stderr


def test_bad_round_children_names_the_value_and_what_is_accepted(tree: Path) -> None:
    done = perflab("run", "--round-children", "sometimes", "--no-track", "--chapters-dir", tree)
    assert done.returncode == 2
    (line,) = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert "round_children='sometimes'" in line and "'auto', 'fresh' or 'kept'" in line


def test_set_overrides_a_benchmarks_own_config_and_a_bad_item_is_one_line(
    chapters: Callable[[dict[str, dict[str, Any]]], Path], tmp_path: Path
) -> None:
    """``--set FIELD=VALUE`` is the command line's layer: over the benchmark's get_config() (which a --config file
    is not), so a chapter's own settings can be tried otherwise without editing it."""
    own = {"CONFIG": {"iterations": 5, "min_rounds": 1, "max_rounds": 1}}
    root = chapters({"ch07/baseline_s.py": own, "ch07/optimized_s.py": own})
    out = tmp_path / "out"
    done = perflab("run", "--chapters-dir", root, "--no-track", "--device", "cpu", "--set", "iterations=7",
                   "--set", "max_measure_seconds=0.5", "--out", out)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for side in ("baseline", "optimized"):
        result = json.loads((out / "ch07" / "s" / side / "result.json").read_text())
        assert len(result["timing"]["samples_ms"]) == 7 and result["config"]["max_measure_seconds"] == 0.5
    for item, said in (("iterations", "expected FIELD=VALUE"), ("iteratons=3", "(did you mean iterations?)"),
                       ("iterations=zero", "iterations='zero' is invalid")):  # fmt: skip
        done = perflab("run", "--chapters-dir", root, "--no-track", "--set", item)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert done.returncode == 2 and len(lines) == 1 and said in lines[0], done.stderr
    done = perflab("run", "--chapters-dir", root, "--no-track", "--set", "warmup=3", "--warmup", "4")
    assert done.returncode == 2 and "--set warmup and a flag of its own" in done.stderr


def test_bad_config_file_is_an_error(tree: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "suite.yaml"
    cfg.write_text("itrations: 3\n")
    done = perflab("run", "--config", cfg, "--no-track", "--chapters-dir", tree)
    assert done.returncode == 2 and "itrations" in done.stderr


def test_verify_good_example(tree: Path) -> None:
    done = perflab("verify", "--targets", "ch7:x", "--chapters-dir", tree)
    assert done.returncode == 0, done.stdout + done.stderr
    for key in ("ch07:x:baseline", "ch07:x:optimized", "ch07:x:optimized_fast"):
        assert f"ok {key}" in done.stdout


def test_verify_reports_a_setup_failure(tree: Path) -> None:
    done = perflab("verify", "--targets", "ch7:bad", "--chapters-dir", tree)
    assert done.returncode == 1
    line = next(ln for ln in done.stdout.splitlines() if "ch07:bad:baseline" in ln)
    assert "failed" in line and "[setup]" in line and "planted failure in setup" in line
    assert "ok ch07:bad:optimized" in done.stdout  # the next variant still ran


def test_verify_wraps_a_long_line_on_a_terminal_only(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rich broke verify's long lines at the console's edge, at column 0, mid-phrase ("12.0" / "s"), off a terminal
    too: as `perflab run`'s, on a terminal (``TTY_COMPATIBLE=1``) a line goes on under the name, between words,
    within 80 columns; off one (a log, awk) each variant is one line, however long."""
    from bench.define.result import ErrorInfo, VariantResult
    from bench.isolate import runner

    said = "ModuleNotFoundError: No module named 'transformer_engine' while importing the kernels after 12.0 s"
    monkeypatch.setattr(runner, "run_variant", lambda spec, *_, **__: VariantResult(
        spec=spec, status="failed", failed_stage="setup", error=ErrorInfo(kind="exception", message=said)))  # fmt: skip
    args = ["verify", "-t", "ch7:x", "--chapters-dir", str(tree)]
    tty = CliRunner().invoke(app, args, env={"COLUMNS": "80", "TTY_COMPATIBLE": "1"}).output.splitlines()
    assert len(tty) > 3 and all(len(x) <= 80 for x in tty), tty
    assert [x.split()[:2] for x in tty if not x.startswith(" " * 8)] == [
        ["failed", f"ch07:x:{v}"] for v in ("baseline", "optimized", "optimized_fast")], tty  # fmt: skip
    assert all(x.startswith(" " * 8) and x[8] != " " for x in tty if not x.startswith(" failed")), tty
    assert sum("after 12.0 s" in x for x in tty) == 3, tty  # a figure beside its unit
    off = CliRunner().invoke(app, args, env={"COLUMNS": "80", "TTY_COMPATIBLE": "0"}).output.splitlines()
    assert len(off) == 3 and all(x.startswith(" failed ch07:x:") and x.endswith(said) for x in off), off


@pytest.mark.parametrize("command", [["verify", "-t"], ["profile", "--no-track"]])
def test_a_cuda_device_the_host_lacks_is_one_line_not_a_failure_per_variant(
    tree: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    from bench.cli import workers
    from bench.errors import PerflabError

    monkeypatch.setattr(workers, "cuda_count", lambda: 0)
    result = CliRunner().invoke(app, [*command, "ch7:x", "--chapters-dir", str(tree), "--device", "cuda"])
    assert isinstance(result.exception, PerflabError), result.output
    assert "device='cuda': torch sees no CUDA GPU on this host; accepted here: auto, cpu" in str(result.exception)
    assert "ch07:x:baseline" not in result.output  # refused before any variant


def test_run_without_tracking_end_to_end(tree: Path) -> None:
    done = perflab("run", "-t", "ch7:x", "--no-track", "--iterations", "3", "--warmup", "1", "--chapters-dir", tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3/3 variants ok, 2/2 pairs verified" in done.stdout
    assert "optimized_orphan.py has no baseline_ partner" in done.stderr


def test_run_with_a_wrong_output_fails(tree: Path, tmp_path: Path) -> None:
    """... and says so to a CI system (--out: the JUnit XML's failure, the summary), with where the time went."""
    import xml.etree.ElementTree as ET

    out = tmp_path / "ci"
    done = perflab("run", "-t", "ch7:wrong", "--no-track", "--iterations", "3", "--warmup", "1", "--chapters-dir", tree,
                   "--out", out)  # fmt: skip
    assert done.returncode == 1
    line = next(ln for ln in done.stdout.splitlines() if "wrong:optimized" in ln)
    assert " mismatch  (output[0]: relative error " in line and "exceeds rtol" in line  # the verdict, and why
    assert "0/1 pairs verified" in done.stdout
    # printed to 0.1 s (a 7 µs op's measurement reads 0.0 s), summary.json's exact
    assert re.search(r"stages \(summed over 2 variants\): start [\d.]+ s, set-up [\d.]+ s, .*measurement [\d.]+ s",
                     done.stdout), done.stdout  # fmt: skip
    (case,) = ET.parse(out / "junit.xml").getroot().iter("testcase")
    failure = case.find("failure")
    assert (case.get("classname"), case.get("name")) == ("ch07", "wrong:optimized") and failure is not None
    assert failure.get("type") == "mismatch"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pairs"][0]["status"] == "mismatch" and summary["stages_s"]["measurement"] > 0
    assert (out / "ch07" / "wrong" / "optimized" / "result.json").is_file()


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--gpus", "0,x"], "'0,x'"), (["--gpus", "0", "--jobs", "2"], "exclude each other")],
)
def test_bad_worker_flags_are_rejected(args: list[str], needle: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", "--no-track", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and needle in done.stderr, done.stderr


def test_jobs_on_cpu_gives_cpu_workers() -> None:
    from bench.cli.run import workers_for as _workers

    assert _workers("cpu", None, 3) == [{}, {}, {}]
    assert _workers("cpu", "2,3", None) == [{"CUDA_VISIBLE_DEVICES": "2"}, {"CUDA_VISIBLE_DEVICES": "3"}]


def test_a_store_in_a_missing_directory_is_one_line_before_anything_runs(tree: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent_dir" / "sub"
    done = perflab("run", "-t", "ch7:x", "--chapters-dir", tree, "--tracking-uri", f"sqlite:///{missing}/x.db")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: tracking URI") and f"'{missing}' does not exist" in done.stderr
    assert not (tmp_path / "nonexistent_dir").exists() and "ok " not in done.stdout  # nothing ran, nothing made


@pytest.mark.parametrize(
    ("sig", "jobs"), [("SIGTERM", "1"), ("SIGINT", "1"), ("SIGTERM", "2")],
)  # fmt: skip
@pytest.mark.slow  # a whole suite's command, stopped (the harness's own interruption: tests/bench/isolate)
def test_a_signal_mid_suite_logs_what_finished_and_ends_the_parent_killed(
    chapters: Callable[[dict[str, dict[str, Any]]], Path], tmp_path: Path, sig: str, jobs: str
) -> None:
    """SIGTERM (timeout, Slurm, kill) stops a suite as Ctrl-C does, on one worker or several (whose children are
    killed, not run out): the finished variants are logged, the parent run ends KILLED with suite_status
    `interrupted`, one line says how many and another what is left; it is not left RUNNING."""
    import signal
    import time

    from mlflow import MlflowClient

    # z unfinished when the signal comes: asleep in a set-up. An example's results come once its last variant is
    # over, and on two workers a's measurements and its comparison wait for z's set-ups and measurements (rule 3 of
    # bench.isolate.workers): z's third variant is still setting up when a's results come.
    slow = {"SETUP_SLEEP": 20.0}
    root = chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {}, "ch07/baseline_z.py": slow,
                     "ch07/optimized_z.py": slow, "ch07/optimized_z_b.py": slow})  # fmt: skip
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")} | {"COLUMNS": "200", "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "perflab", "run", "--chapters-dir", str(root), "--tracking-uri",
                             uri, "--experiment", "stopped", "--jobs", jobs, "--device", "cpu", "--rounds", "1"],
                            cwd=REPO, env=env,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            # a shell's background job (CI under nohup …&) starts with SIGINT ignored, and the
                            # command keeps a signal it was started ignoring: Ctrl-C's default for this one
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    assert proc.stdout is not None
    for text in proc.stdout:  # the a pair done: z is not
        if "2/5" in text:
            break
    time.sleep(1.0)
    t0 = time.monotonic()
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - t0 < 15, err  # children killed, not run out
    said = re.search(r"interrupted after (\d) of 5 variants; they are logged in MLflow parent run (\w+)", err)
    assert said is not None, err
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("stopped").experiment_id])
    parent = next(r for r in runs if "perflab.variant" not in r.data.tags)
    assert parent.info.run_id == said[2] and parent.info.status == "KILLED"
    assert parent.data.tags["perflab.suite_status"] == "interrupted"
    logged = sorted(r.data.tags["perflab.example"] + ":" + r.data.tags["perflab.variant"] for r in runs
                    if r is not parent)  # fmt: skip
    assert 2 <= len(logged) == int(said[1]) < 5, logged
    rest = [f"ch07:{x}" for x in "az" if not {f"{x}:baseline", f"{x}:optimized"} <= set(logged)]
    again = ["--device", "cpu", "--experiment", "stopped", "--tracking-uri", uri, "--chapters-dir", str(root),
             "--jobs", jobs, "--rounds", "1"]  # measured as the suite was  # fmt: skip
    rest_line = shlex.join(["perflab", "run", "-t", ",".join(rest), *again])  # a half-done example runs whole
    assert f"the rest: {rest_line}\n" in err, err


def test_server_status_marks_the_servers_stop_would_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.isolate import server

    up = {"triton_interpret": "1", "uptime_s": 5.0, "children": 0, "idle_limit_s": 900.0, "preload_errors": None}
    found = [{"pid": 11, "key": "mine", **up}, {"pid": 12, "key": "theirs", **up},
             {"pid": 13, "key": "mine2", "starting": True}]  # fmt: skip
    monkeypatch.setattr(server, "servers", lambda: found)
    monkeypatch.setattr(server, "own_keys", lambda: {"mine", "mine2"})
    out = CliRunner().invoke(app, ["server", "status"], env={"COLUMNS": "200"}).output
    assert "server 11 key mine (this checkout's): TRITON_INTERPRET='1'" in out
    assert "server 12 key theirs: TRITON_INTERPRET='1'" in out
    assert "server 13 key mine2 (this checkout's): starting" in out


def test_server_status_fits_80_columns_each_figure_beside_its_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns rich broke a server's line where it reached the edge ("up" / "12345 s", the next line at column
    0) and printed preload errors as a dict's repr: each line within 80, the rest under its server's line."""
    from bench.isolate import server

    up = {
        "triton_interpret": "1",
        "uptime_s": 12345.0,
        "children": 3,
        "idle_limit_s": 900.0,
        "preload_errors": {"transformer_engine": "ModuleNotFoundError: No module named 'transformer_engine'"},
    }
    monkeypatch.setattr(server, "servers", lambda: [{"pid": 123456, "key": "0123456789abcdef", **up}])
    monkeypatch.setattr(server, "own_keys", lambda: {"0123456789abcdef"})
    out = CliRunner().invoke(app, ["server", "status"], env={"COLUMNS": "80"}).output
    lines = out.splitlines()
    assert len(lines) > 1 and all(len(x) <= 80 for x in lines), out
    assert lines[0].startswith("server 123456 key 0123456789abcdef (this checkout's): ") and all(
        x.startswith("    ") and x[4] != " " for x in lines[1:]), out  # fmt: skip
    said = " ".join(out.split())
    for fact in (
        "TRITON_INTERPRET='1'",
        "up 12345 s",
        "3 child(ren)",
        "exits after 900 s idle",
        "preload errors: transformer_engine (ModuleNotFoundError: No module named 'transformer_engine')",
    ):
        assert fact in said, out
    assert all(any(f in x for x in lines) for f in ("12345 s", "900 s")) and "{" not in out, out  # units kept; no repr


def test_server_stop_left_running_fits_80_columns_under_its_first_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns rich broke the "left running" line at the edge, going on at column 0: each line within 80, the
    rest indented under it, every pid whole."""
    from bench.isolate import server

    others = [123456, 234567, 345678, 456789]
    monkeypatch.setattr(server, "stop_all", lambda keys=None: [4242])
    monkeypatch.setattr(server, "servers", lambda timeout=None: [{"pid": p} for p in others])
    monkeypatch.setattr(server, "own_keys", lambda: {"mine"})
    out = CliRunner().invoke(app, ["server", "stop"], env={"COLUMNS": "80"}).output
    lines = out.splitlines()
    assert lines[0] == "stopped 1 server(s): 4242" and lines[1].startswith("left running: 4 server(s)"), out
    assert len(lines) > 2 and all(len(x) <= 80 for x in lines), out
    assert all(x.startswith("    ") and x[4] != " " for x in lines[2:]), out
    said = " ".join(" ".join(lines[1:]).split())
    assert f"({', '.join(map(str, others))}); --all stops them too" in said, out
