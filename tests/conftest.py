"""Shared fixtures: fixture benchmark files written into temporary chapters trees.

Every fixture benchmark is ``tests/fixtures/benchmark_template.py`` plus a few knob assignments
appended at its end; see that file for the knobs.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.services import mlflow_server, postgres, ray_cluster, team  # noqa: F401  (fixtures: PostgreSQL, MLflow, Ray)
from tests.session import (  # noqa: F401  (hooks: the fast and full tiers, SIGTERM)
    pytest_addoption,
    pytest_cmdline_main,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_configure_node,
    pytest_report_header,
    pytest_runtest_logfinish,
    pytest_runtest_logreport,
    pytest_runtest_logstart,
    pytest_runtest_protocol,
    pytest_runtest_setup,
    pytest_sessionfinish,
    pytest_unconfigure,
    pytest_xdist_make_scheduler,
)


@pytest.fixture(scope="session", autouse=True)
def _triton_interpreter_mended() -> None:
    """Kernels interpreted in a test's own process read their scalars as the harness's children do, whichever
    Triton release is installed (``bench.define.interpreter``)."""
    from bench.define import interpreter

    interpreter.mend()


# The warm-up floor of the tests' variants (the GPU clocks' own; the host clock's is 0.3 s: bench.measure.timer)
TEST_MIN_WARMUP_S = 0.05
TEMPLATE = Path(__file__).parent / "fixtures" / "benchmark_template.py"
_TEMPLATE_TEXT = TEMPLATE.read_text()
# Module-level UPPER_CASE assignments of the template are its knobs.
KNOBS = frozenset(re.findall(r"^([A-Z][A-Z0-9_]*)(?::[^=\n]*)? =", _TEMPLATE_TEXT, flags=re.M)) - {"N"}


class WriteBenchmark(Protocol):
    def __call__(self, path: Path, *, extra: str = "", **knobs: Any) -> Path: ...


def _write_benchmark(path: Path, *, extra: str = "", **knobs: Any) -> Path:
    """Write the template to ``path`` with ``knobs`` set and ``extra`` source lines appended."""
    unknown = sorted(set(knobs) - KNOBS)
    if unknown:  # a misspelt knob would silently test nothing
        raise ValueError(f"unknown fixture knobs {unknown}; the template has {sorted(KNOBS)}")
    lines = [f"{name} = {value!r}" for name, value in knobs.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_TEMPLATE_TEXT + "\n# set by the test\n" + "\n".join(lines) + "\n" + extra + "\n")
    return path


@contextlib.contextmanager
def _session_env(values: dict[str, str]) -> Iterator[None]:
    """``values`` in the environment for the session, then the environment as it was."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session", autouse=True)
def _private_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What perflab keeps of a host's runs is not the tests' to read or write: each variant's time (perflab run's
    ~/.cache/perflab/durations.json), and the ceilings ``perflab peak`` measured (~/.cache/perflab/peaks.json:
    with them, a profiled CPU variant's bound reads ``latency`` from its roofline; without, ``unknown``). A test
    that needs ceilings writes its own cache. What perflab writes by itself (spools of results a store did not
    take, sweep data) goes under $PERFLAB_RESULTS_DIR, else ./perflab-results: not into the checkout."""
    d = tmp_path_factory.mktemp("caches")
    with _session_env({"PERFLAB_DURATIONS": str(d / "durations.json"), "PERFLAB_PEAK_CACHE": str(d / "peaks.json"),
                       "PERFLAB_RESULTS_DIR": str(tmp_path_factory.mktemp("results"))}):  # fmt: skip
        yield


@pytest.fixture(scope="session", autouse=True)
def _private_servers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tests' pre-warmed servers (bench.isolate.server) live in a directory of their own, and are stopped when the
    session ends (with an idle exit of their own should the session be killed).

    A server is keyed on the import path (bench.isolate.rendezvous), less the directory of setuptools' vendored
    packages, which CPU Inductor's C++ builder appends when it imports setuptools: a test that compiles no longer
    makes its process start a second server (~7 s of CPU on the 2-core host), and the path need not be settled
    here first."""
    with _session_env({"PERFLAB_RUNTIME_DIR": str(tmp_path_factory.mktemp("servers")), "PERFLAB_SERVER_IDLE_S": "300"}):
        yield
        from bench.isolate import server

        server.stop_all()


@pytest.fixture(scope="session", autouse=True)
def _one_round() -> Iterator[None]:
    """Every pair measured in one round, a child per side ($PERFLAB_ROUNDS=1, bench.define.config), in this process
    and the commands the tests start, wherever a test does not set the rounds itself: interleaved rounds are the
    rounds tests' subject (``default_rounds``), and each later round of another test would time again what its
    first round checked. A new chapter's tests get this without asking. Likewise a warm-up of at least 0.05 s
    ($PERFLAB_MIN_WARMUP_SECONDS), not the host clock's 0.3 s: the tiers run hundreds of variants, whose checks are
    the point (``default_warmup`` for a test of the floor a user gets)."""
    with _session_env({"PERFLAB_ROUNDS": "1", "PERFLAB_MIN_WARMUP_SECONDS": str(TEST_MIN_WARMUP_S)}):
        yield


@pytest.fixture(autouse=True)
def intra_op_threads_as_found() -> Iterator[None]:
    """torch's intra-op threads in this process given back as the test found them: a sweep's trial run in the
    test's process caps them at the host's free cores (``bench.measure.fit_threads``: one under load), which
    lasted into the process's later tests (``test_round_caps`` then skipped: "torch runs one intra-op thread")."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture
def one_intra_op_thread() -> Iterator[None]:
    """torch's intra-op threads at one in this process while the test runs (what the test computes here: the
    children the harness starts keep their own). The tiers run three processes on two cores, where an op's team of
    two threads mostly waits, spinning, for a member that is not running: tests/chapters and tests/models, which
    compute in the test's process, took 107-108 s (194 s of CPU) with one thread against 169-172 s (313-323 s)
    with two, on three processes. Their directories' conftests use it for every test."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def default_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds as a user gets them (at least 3, at most 8): $PERFLAB_ROUNDS unset for the test."""
    monkeypatch.delenv("PERFLAB_ROUNDS", raising=False)


@pytest.fixture
def default_warmup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up floor as a user gets it (the clock's own): $PERFLAB_MIN_WARMUP_SECONDS unset for the test."""
    monkeypatch.delenv("PERFLAB_MIN_WARMUP_SECONDS", raising=False)


@pytest.fixture(scope="session")
def write_benchmark() -> WriteBenchmark:
    return _write_benchmark


@pytest.fixture
def chapters(tmp_path: Path) -> Callable[[dict[str, dict[str, Any]]], Path]:
    """Factory: ``chapters({"ch07/baseline_x.py": {}, "ch07/optimized_x.py": {"SCALE": 2.5}})`` → root.

    Each value holds the knobs for that file (``extra`` included); the root is ``tmp_path/chapters``.
    """

    def make(files: dict[str, dict[str, Any]]) -> Path:
        root = tmp_path / "chapters"
        root.mkdir(exist_ok=True)
        for rel, knobs in files.items():
            _write_benchmark(root / rel, **knobs)
        return root

    return make


SlowStart = Callable[[float, float], Callable[[], None]]


@pytest.fixture
def slow_start() -> SlowStart:
    """Factory: ``slow_start(slow_s, fast_s)`` → an op that busy-waits ``slow_s`` per call during the first
    0.1 s after it was made, ``fast_s`` after that (a fresh process's slow start, as on the H100 host)."""

    def make(slow_s: float, fast_s: float) -> Callable[[], None]:
        start = time.perf_counter()

        def op() -> None:
            spin_s = slow_s if time.perf_counter() - start < 0.1 else fast_s
            t = time.perf_counter()
            while time.perf_counter() - t < spin_s:
                pass

        return op

    return make
