"""The test session (hooks, imported by tests/conftest.py): its two tiers, and how it ends on SIGTERM.

Tiers. ``python3 -m pytest`` runs the fast tier: every test but those marked ``slow`` (the services: PostgreSQL, the
MLflow server, Ray; the chapters' whole smoke runs; kernels compiled for an H100; whole suites timed on the wall;
most variants of several ranks or in fresh interpreters; checks of 10 s and more whose module another fast
test covers: a compile, a search, a worker pool; the README's first hour in a fresh clone). ``--full`` runs
every test (CI: ``.ci/run``). Both run on ``WORKERS`` processes where pytest-xdist is installed
(``pytest_cmdline_main``), a test at a time to whichever process is free, except groups kept on one process
(``xdist_group``): the tests of the team's services (one PostgreSQL and MLflow server a session, ``TEAM_FIXTURES``),
and a file's tests where they share a fixture wider than a test (a module's, a class's, or a session fixture of
their own: built once, not once a process; tests of several files that share one name their group with an
``xdist_group`` mark of their own, which wins). A test is ``slow`` by its mark (set at the test, saying why) or by
what it uses (``SLOW_FIXTURES``, the ``clone`` mark). An explicit ``-m`` expression, or a test named by its id
(``file.py::test``), picks its tests itself, in one process. A test that takes its process down fails, named, and
the session runs on to its end on a new process (tests/scheduling.py).

Compiled code is kept: where ``PYTHONDONTWRITEBYTECODE`` is set (a container's default) every process would compile
the tests and perflab's modules again (the tests' asserts rewritten: ~8 s of CPU per session on the 2-core host;
each ``perflab`` command or fresh child a second or so more), so the session and the processes it starts cache it
under ``~/.cache/perflab/pycache`` (``PYTHONPYCACHEPREFIX``; one set already is kept), outside the checkout.

A new SQLite MLflow store, in this process, is a copy of one migrated once per session (by the first of its processes
to need one): MLflow migrates each new store (seconds: 12 s with the 2-core host loaded, against 0.2 s for the
copy), and the tests make dozens.

Where the time went: with ``PERFLAB_TEST_TIMELINE=FILE`` the main process appends a line per test phase to FILE
(process, phase, start and stop in Unix seconds, test id; tab-separated): which process ran what when, which test
ended the session.

SIGTERM (``timeout``, a CI runner's or Slurm's end of a job) stops the session as Ctrl-C does: the tests then
running are named and interrupted (a ``perflab run`` one runs logs what finished), session fixtures are torn down
(servers, PostgreSQL, Ray), and the session ends with status 143; teardown that takes more than ``GRACE_S`` is cut
short, and a second SIGTERM ends it at once. A library that takes SIGTERM for itself in this process (``ray.init``
makes it ``sys.exit``: the test in progress would fail and the session run on) gets ours back after each test.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

# The services (tests/services.py); compile_sm90: a chapter's kernels compiled for an H100 in a fresh process
SLOW_FIXTURES = frozenset({"team", "postgres", "mlflow_server", "ray_cluster", "compile_sm90"})
# The session fixtures of the team recipe (tests/services.py): their tests run on one process, which starts them once
TEAM_FIXTURES = frozenset({"team", "postgres", "mlflow_server"})
# Processes either tier runs on where pytest-xdist is installed, at most two a core: the tests wait about half their
# wall time (children started, timed and waited for). On the 2-core host the fast tier passed on 3 in 355 s; 4 took
# 300-338 s, but once a data-rate test read low on the crowded cores (docs/results/cpu.md)
WORKERS = 3
# Seconds of teardown after a SIGTERM, then the session ends whatever is left ($PERFLAB_TEST_TERM_GRACE_S)
GRACE_S = float(os.environ.get("PERFLAB_TEST_TERM_GRACE_S") or 30.0)
_terminated = threading.Event()
_running: set[str] = set()  # the tests started and not yet finished (``pytest_runtest_logstart``)
_worker = False  # this process is a pytest-xdist worker (``pytest_configure``)
_stderr = -1  # the session's stderr (a copy of the descriptor): output capture redirects descriptor 2 during tests


def slow_for(values: list[Any], slow: set[Any]) -> list[Any]:
    """``values`` as a parametrize list, those in ``slow`` marked ``slow`` (the full tier only)."""
    return [pytest.param(v, marks=pytest.mark.slow) if v in slow else v for v in values]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full", action="store_true", default=False,
        help="run every test: the fast tier and those marked slow (services, whole smoke runs; CI's .ci/run)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    global _stderr, _worker
    _worker = hasattr(config, "workerinput")
    config.addinivalue_line("markers", "slow: in the full tier only (--full): services, whole smoke runs")
    if _stderr < 0:
        _stderr = os.dup(2)  # capture is suspended while plugins are configured: this is the terminal's
    _take_sigterm()
    _keep_compiled_code()


def _keep_compiled_code() -> None:
    if not sys.dont_write_bytecode and not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return  # Python's own __pycache__ directories
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(Path.home() / ".cache" / "perflab" / "pycache")
    sys.pycache_prefix = prefix  # read at each import: the test modules not yet imported, the children below
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Either tier on ``WORKERS`` processes where pytest-xdist is installed (the test extra has it), as if ``-n``
    had been given, the groups of ``_xdist_group`` each on one process (``--dist loadgroup``): not a worker's own
    session, a ``-n`` or ``-p no:xdist`` of the user's, tests picked by ``-m`` or id, ``--co`` or ``--pdb``."""
    if (not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput")
            or os.environ.get("PYTEST_XDIST_WORKER") or config.getoption("numprocesses", None) is not None
            or _picks_itself(config) or config.getoption("collectonly") or config.getoption("usepdb")):  # fmt: skip
        return
    workers = min(WORKERS, 2 * len(os.sched_getaffinity(0)))
    if workers > 1:
        config.option.numprocesses = workers
        if config.option.dist == "no":
            config.option.dist = "loadgroup"


def pytest_report_header(config: pytest.Config) -> str:
    if _picks_itself(config):
        return "tier: as selected (-m or test ids)"
    workers = config.getoption("numprocesses", None)
    on = f", on {workers} processes (pytest-xdist; -n 0: one)" if workers else ""
    if config.getoption("--full"):
        return f"tier: full (--full){on}"
    return f"tier: fast (tests marked slow left out: --full){on}"


def _picks_itself(config: pytest.Config) -> bool:
    return bool(config.getoption("markexpr")) or any("::" in str(arg) for arg in config.args)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``'s scheduler with a worker's crash handled (tests/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.scheduling import GroupScheduling

    return GroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """A worker parses the command line again: the ``--dist`` set by ``pytest_cmdline_main`` reaches it here."""
    node.workerinput["perflab_dist"] = node.config.option.dist


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", {})
    if workerinput.get("perflab_dist") == "loadgroup":
        config.option.loadgroup = True  # the groups' marks become pytest-xdist's node id suffixes
    grouped = getattr(config.option, "loadgroup", False)  # a worker's session under --dist loadgroup
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker("clone"):
            item.add_marker(pytest.mark.slow)
        group = _xdist_group(item) if grouped else None
        if group and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    if config.getoption("--full") or _picks_itself(config):
        return
    fast = [item for item in items if item.get_closest_marker("slow") is None]
    if len(fast) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("slow") is not None])
        items[:] = fast


def _xdist_group(item: pytest.Item) -> str | None:
    """The process group of ``item`` under ``--dist loadgroup``: ``team`` for the team's services, its file's name
    where it uses a fixture that outlives a test and is not the whole session's (tests/conftest.py's, a plugin's),
    else None (any process)."""
    if TEAM_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "team"
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        scope, where = defs[-1].scope, defs[-1].baseid
        if scope in ("module", "class", "package") or (scope == "session" and where not in ("", "tests")):
            return Path(item.path).stem
    return None


def _take_sigterm() -> None:
    if threading.current_thread() is threading.main_thread() and not _terminated.is_set():
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: Any) -> None:
    _terminated.set()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second one ends the session at once
    timer = threading.Timer(GRACE_S, _cut_short)
    timer.daemon = True
    timer.start()
    running = "".join(f"\n  running: {test}" for test in sorted(_running))  # the workers', in the main process
    _say(f"SIGTERM: stopping the session (teardown, at most {GRACE_S:.0f} s){running}")
    # KeyboardInterrupt, not pytest.exit: code under test catches Exception (pytest's Exit is one), not this
    raise KeyboardInterrupt("SIGTERM")


def _cut_short() -> None:
    _say(f"SIGTERM: teardown still running after {GRACE_S:.0f} s; ending now")
    os._exit(128 + signal.SIGTERM)


def _say(text: str) -> None:
    os.write(_stderr if _stderr >= 0 else 2, f"\n{text}\n".encode())


class _MigratedOnce:
    """``mlflow.store.db.utils._initialize_tables`` for a SQLite file: the session's migrated template copied in
    (SQLite's backup API); the template is made by MLflow's own on first use, by whichever of the session's processes
    needs it first (under a file lock: the others wait, then copy it). Other databases: MLflow's own."""

    def __init__(self, initialize: Any, template: Path) -> None:
        self.initialize, self.template, self.lock = initialize, template, threading.Lock()

    def __call__(self, engine: Any) -> None:
        path = engine.url.database if engine.url.get_backend_name() == "sqlite" else None
        if not path or path == ":memory:":
            self.initialize(engine)
            return
        with self.lock:
            if not self.template.exists():
                self._make()
        with contextlib.closing(sqlite3.connect(self.template)) as src, contextlib.closing(sqlite3.connect(path)) as to:
            src.backup(to)

    def _make(self) -> None:
        import fcntl

        import sqlalchemy

        with open(self.template.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process of the session may be making it
            if self.template.exists():
                return
            part = self.template.with_suffix(f".{os.getpid()}.part")
            made = sqlalchemy.create_engine(f"sqlite:///{part}")
            self.initialize(made)
            made.dispose()
            part.replace(self.template)  # whole or absent: a copy never reads a half-made template


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made lives as long as the session (the modules it imported: torch's, MLflow's, the tests'):
    moved out of the garbage collector's reach (``gc.freeze``), so that a full collection during the tests, and the
    five pytest makes at the session's end (for exceptions raised in finalizers), traverse only what the tests made
    since: those five took 7-8 s of each worker's end on the 2-core host, which the session's end waits for."""
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    utils = sys.modules.get("mlflow.store.db.utils")  # once a test imported MLflow's store; never imported here
    if utils is not None and not isinstance(utils._initialize_tables, _MigratedOnce):
        base = item.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        if hasattr(item.config, "workerinput"):
            base = base.parent  # a pytest-xdist worker's is in the session's: one template for all its processes
        template = base / "mlflow-template.db"
        utils._initialize_tables = _MigratedOnce(utils._initialize_tables, template)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    yield
    if signal.getsignal(signal.SIGTERM) is not _on_sigterm:
        _take_sigterm()  # a test (ray.init) took it


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _running.add(nodeid)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _running.discard(nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("PERFLAB_TEST_TIMELINE")
    if not path or _worker:
        return  # the main process writes every process's reports
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    fields = (getattr(gateway, "id", "main"), report.when, f"{report.start:.3f}", f"{report.stop:.3f}", report.nodeid)
    with open(path, "a") as f:
        f.write("\t".join(fields) + "\n")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _terminated.is_set():
        session.exitstatus = 128 + signal.SIGTERM


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _terminated.is_set():  # threads a test left behind must not keep the process alive at exit
        sys.stdout.flush()
        os._exit(128 + signal.SIGTERM)
    if hasattr(config, "workerinput"):
        atexit.register(_end_without_teardown)  # registered last: runs first


def _end_without_teardown() -> None:
    """A worker's end, once its results are sent: the exit handlers (all of them, last registered first, as at any
    exit), then the process ends without the interpreter freeing every module and object one by one: 1.5-2 s of
    torch's and the tests' objects, for which the session's end waits on its last worker."""
    atexit.unregister(_end_without_teardown)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
