"""tests/session.py: the fast tier leaves the slow tests out and runs on pytest-xdist's workers, and a SIGTERM ends
the session promptly (a test that took SIGTERM for itself, as ``ray.init`` does, included), its session fixtures torn
down."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import session

REPO = Path(__file__).resolve().parents[1]

CONFTEST = """
import pytest
from tests.session import (pytest_addoption, pytest_collection_modifyitems, pytest_configure, pytest_report_header,
                           pytest_runtest_logfinish, pytest_runtest_logstart, pytest_runtest_protocol,
                           pytest_sessionfinish, pytest_unconfigure)

@pytest.fixture(scope="session")
def held():
    yield
    import time
    time.sleep({teardown_s})
    open("torn-down", "w").close()

@pytest.fixture
def ray_cluster():
    return None
"""

TESTS = """
import signal, sys, time
import pytest

def test_takes_sigterm_as_ray_init_does(held):
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))

def test_sleeps(held):
    open("started", "w").close()
    time.sleep(300)

def test_never_reached():
    pass

@pytest.mark.slow
def test_marked_slow():
    pass

def test_on_a_service(ray_cluster):
    pass
"""


def _session(tmp_path: Path, teardown_s: float, *args: str, grace_s: float = 30.0,
             tests: str = TESTS) -> subprocess.Popen[str]:  # fmt: skip
    (tmp_path / "conftest.py").write_text(CONFTEST.format(teardown_s=teardown_s))
    (tmp_path / "test_x.py").write_text(tests)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PERFLAB_TEST_TERM_GRACE_S": str(grace_s)}
    named = [] if any("::" in a for a in args) else ["test_x.py"]
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, *named],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip


def _terminate_when_started(proc: subprocess.Popen[str], tmp_path: Path) -> tuple[str, float]:
    deadline = time.monotonic() + 120
    while not (tmp_path / "started").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    return out, time.monotonic() - t0


def test_sigterm_ends_the_session_and_tears_its_fixtures_down(tmp_path: Path) -> None:
    proc = _session(tmp_path, 0.0, "-v")
    out, took = _terminate_when_started(proc, tmp_path)
    assert proc.returncode == 128 + signal.SIGTERM and took < 30, out
    assert "SIGTERM: stopping the session" in out and "test_never_reached" not in out
    assert "running: test_x.py::test_sleeps" in out  # what the session was waiting for is named
    assert (tmp_path / "torn-down").exists()  # the session fixture's teardown ran


def test_a_teardown_that_hangs_is_cut_short(tmp_path: Path) -> None:
    proc = _session(tmp_path, 600.0, grace_s=3.0)
    out, took = _terminate_when_started(proc, tmp_path)
    assert proc.returncode == 128 + signal.SIGTERM and took < 30, out  # 3 s of grace, not 600 s of teardown
    assert "teardown still running after 3 s; ending now" in out and not (tmp_path / "torn-down").exists()


def test_the_fast_tier_leaves_out_what_is_slow_or_uses_a_service(tmp_path: Path) -> None:
    expected = {(): {"test_takes_sigterm_as_ray_init_does", "test_sleeps", "test_never_reached"},
                ("--full",): {"test_takes_sigterm_as_ray_init_does", "test_sleeps", "test_never_reached",
                              "test_marked_slow", "test_on_a_service"},
                ("-m", "slow"): {"test_marked_slow", "test_on_a_service"},  # a service's test is slow
                ("test_x.py::test_on_a_service",): {"test_on_a_service"}}  # named: run, slow or not  # fmt: skip
    runs = {}
    for n, args in enumerate(expected):  # at once: a session's start is seconds on a loaded machine
        (tmp_path / str(n)).mkdir()
        runs[args] = _session(tmp_path / str(n), 0.0, "--co", "-q", *args, tests=TESTS.replace("time.sleep(300)", ""))
    for args, proc in runs.items():
        out, _ = proc.communicate(timeout=240)
        assert {line.split("::")[1] for line in out.splitlines() if "::" in line} == expected[args], (args, out)


class _Config:
    """What ``pytest_cmdline_main`` reads of a session's config: options, plugins, args."""

    def __init__(self, args: list[str], xdist: bool = True, **options: object) -> None:
        self.args, self.xdist = args, xdist
        self.options = {"--full": False, "markexpr": "", "collectonly": False, "usepdb": False, "numprocesses": None,
                        **options}  # fmt: skip
        self.option = SimpleNamespace(numprocesses=self.options["numprocesses"], dist="no")
        self.pluginmanager = SimpleNamespace(hasplugin=lambda name: name == "xdist" and self.xdist)

    def getoption(self, name: str, default: object = None) -> object:
        return self.options.get(name, default)


def test_both_tiers_run_on_workers_where_xdist_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    for tier in (_Config([]), _Config([], **{"--full": True})):
        session.pytest_cmdline_main(tier)  # type: ignore[arg-type]
        assert (tier.option.numprocesses, tier.option.dist) == (min(session.WORKERS, 4), "loadgroup")
    for config in (_Config(["tests/x.py::test_y"]), _Config([], markexpr="slow"), _Config([], numprocesses=0),
                   _Config([], xdist=False), _Config([], collectonly=True)):  # fmt: skip
        session.pytest_cmdline_main(config)  # type: ignore[arg-type]
        assert config.option.numprocesses == config.options["numprocesses"] and config.option.dist == "no"
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    one = _Config([])
    session.pytest_cmdline_main(one)  # type: ignore[arg-type]
    assert one.option.numprocesses == 2  # two a core


def _item(fixtures: dict[str, tuple[str, str]], path: str = "tests/a/test_b.py") -> SimpleNamespace:
    """What ``_xdist_group`` reads of a test: its fixtures' names, each fixture's scope and where it is defined."""
    defs = {name: [SimpleNamespace(scope=scope, baseid=where)] for name, (scope, where) in fixtures.items()}
    return SimpleNamespace(fixturenames=list(fixtures), _fixtureinfo=SimpleNamespace(name2fixturedefs=defs),
                           path=Path(path))  # fmt: skip


def test_a_processes_group_keeps_services_and_a_files_shared_fixtures_on_one_process() -> None:
    group = session._xdist_group
    # the team's PostgreSQL and MLflow server: started once, on one process
    assert group(_item({"mlflow_server": ("session", "tests"), "tmp_path": ("function", "")})) == "team"
    assert group(_item({"postgres": ("session", "tests")})) == "team"
    # a fixture wider than a test, not the whole session's: the file's tests together
    assert group(_item({"suite": ("module", "tests/a/test_b.py")})) == "test_b"
    assert group(_item({"ray_cluster": ("module", "tests")})) == "test_b"
    assert group(_item({"interp": ("session", "tests/kernels")}, "tests/kernels/test_c.py")) == "test_c"
    # a test's own fixtures, tests/conftest.py's session fixtures, a plugin's: any process
    assert group(_item({"tmp_path": ("function", ""), "write_benchmark": ("session", "tests"),
                        "tmp_path_factory": ("session", "")})) is None  # fmt: skip


def test_the_workers_hear_of_the_groups_from_the_main_process() -> None:
    """A worker parses the command line again: without word from the main process it would not group."""
    node = SimpleNamespace(workerinput={}, config=SimpleNamespace(option=SimpleNamespace(dist="loadgroup")))
    session.pytest_configure_node(node)
    worker = SimpleNamespace(workerinput=node.workerinput, option=SimpleNamespace(loadgroup=False), args=[],
                             getoption=lambda name: False)  # fmt: skip
    item = SimpleNamespace(_fixtureinfo=SimpleNamespace(name2fixturedefs={"s": [SimpleNamespace(
        scope="module", baseid="tests/a/test_b.py")]}), fixturenames=["s"], path=Path("tests/a/test_b.py"),
        marks=[], get_closest_marker=lambda name: None)  # fmt: skip
    item.add_marker = item.marks.append
    session.pytest_collection_modifyitems(worker, [item])  # type: ignore[arg-type]
    assert worker.option.loadgroup and [m.args for m in item.marks] == [("test_b",)]


def test_a_tests_own_group_wins_over_its_files() -> None:
    """Tests of several files that share a session fixture name one group (tests/kernels/cli_run.py): kept."""
    worker = SimpleNamespace(workerinput={"perflab_dist": "loadgroup"}, option=SimpleNamespace(loadgroup=False),
                             args=[], getoption=lambda name: False)  # fmt: skip
    own = pytest.mark.xdist_group("kernels_cli").mark
    item = SimpleNamespace(_fixtureinfo=SimpleNamespace(name2fixturedefs={"s": [SimpleNamespace(
        scope="session", baseid="tests/kernels")]}), fixturenames=["s"], path=Path("tests/kernels/test_b.py"),
        marks=[own], get_closest_marker=lambda name: own if name == "xdist_group" else None)  # fmt: skip
    item.add_marker = item.marks.append
    session.pytest_collection_modifyitems(worker, [item])  # type: ignore[arg-type]
    assert [m.args for m in item.marks] == [("kernels_cli",)]


CRASHES = """
import os
import pytest

@pytest.mark.parametrize("n", range(24))
def test_quick(n):
    pass

def test_takes_its_process_down():
    os.abort()  # as a segfault or a library's abort does: no report from the worker, its process gone

@pytest.mark.xdist_group("held")
@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    if n == 1:
        os._exit(3)
"""


@pytest.mark.slow  # a session of its own on two processes (~9 s beside the tier's)
def test_a_worker_that_crashes_fails_its_test_and_the_session_runs_on_to_its_end(tmp_path: Path) -> None:
    """pytest-xdist 3.8 alone waits for ever after a crash under ``--dist loadgroup`` (tests/scheduling.py)."""
    (tmp_path / "conftest.py").write_text("from tests.session import pytest_xdist_make_scheduler  # noqa: F401\n")
    (tmp_path / "test_x.py").write_text(CRASHES)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist",
                             "loadgroup", "-q", "-rf", "test_x.py"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the workers of a session that hung
    assert proc.returncode == 1, out
    assert "crashed while running 'test_x.py::test_takes_its_process_down'" in out, out
    assert "crashed while running 'test_x.py::test_grouped[1]@held'" in out, out
    assert "2 failed, 27 passed" in out, out  # each crash once; the rest of the group run on the new worker


ORDERED = """
import time
import pytest

@pytest.mark.xdist_group("big1")
@pytest.mark.parametrize("n", range(10))
def test_big1(n):
    time.sleep(0.05)

@pytest.mark.xdist_group("big2")
@pytest.mark.parametrize("n", range(8))
def test_big2(n):
    time.sleep(0.05)

@pytest.mark.xdist_group("team")
@pytest.mark.parametrize("n", range(3))
def test_team(n):
    time.sleep(0.05)

@pytest.mark.parametrize("n", range(6))
def test_single(n):
    pass
"""


@pytest.mark.slow  # a session of its own on two processes (~8 s beside the tier's)
def test_the_longest_groups_go_first_and_the_timeline_says_who_ran_what_when(tmp_path: Path) -> None:
    """pytest-xdist alone hands out the groups by their count of tests (big1, big2, then team); tests/scheduling.py's
    FIRST go first (team before big2), and ``PERFLAB_TEST_TIMELINE`` records every phase of every test."""
    conftest = ("from tests.session import pytest_configure, pytest_runtest_logreport, "
                "pytest_xdist_make_scheduler  # noqa: F401\n")  # fmt: skip
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_x.py").write_text(ORDERED)
    timeline = tmp_path / "timeline.tsv"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PERFLAB_TEST_TIMELINE": str(timeline)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                           "-q", "test_x.py"], cwd=tmp_path, env=env, text=True, capture_output=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("\t") for line in timeline.read_text().splitlines()]
    assert len(rows) == 27 * 3 and {r[1] for r in rows} == {"setup", "call", "teardown"}
    assert {r[0] for r in rows} == {"gw0", "gw1"} and all(float(r[2]) <= float(r[3]) for r in rows)
    start = {}
    for _, _, t0, _, nodeid in rows:
        group = nodeid.rsplit("@", 1)[-1] if "@" in nodeid else "single"
        start[group] = min(start.get(group, float("inf")), float(t0))
    assert start["team"] < start["big2"], start


def test_the_conftest_takes_every_hook_of_the_session() -> None:
    """A hook defined in tests/session.py and not imported by tests/conftest.py is never called (the timeline's was
    not, once)."""
    from tests import conftest, session

    hooks = {name for name in vars(session) if name.startswith("pytest_")}
    assert hooks <= set(vars(conftest)), sorted(hooks - set(vars(conftest)))
