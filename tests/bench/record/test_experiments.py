"""Where suites land and how they are found: one history whatever the entry point (``mlflow run`` adopts its
project run, in MLflow's experiment "Default", where ``perflab run`` logs too), names a person can read, and
a local store whose directory does not exist refused before anything is created."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from analysis.regression import check_suite
from bench.errors import ConfigError
from bench.record import latest_suite_run_id
from bench.record.store import check_tracking_uri, client
from bench.record.tracking import Tracker, suite_name
from tests.analysis.synthetic import draw, result

_MLFLOW_ENV = ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID")
NAME = re.compile(r"^ch07 on NVIDIA H100 80GB HBM3, \d{4}-\d\d-\d\d \d\d:\d\d$")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name in _MLFLOW_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    yield {"uri": uri, "client": MlflowClient(tracking_uri=uri)}


def log(uri: str, median: float, seed: int) -> str:
    with Tracker(tracking_uri=uri, tags={"perflab.targets": "7"}) as t:  # run_name None: a suite's
        t.log_variant(result("ch07:x:baseline", draw(median, seed)))
        t.finish("# s\n", {})
    return t.parent_run_id


def test_suites_of_mlflow_run_and_perflab_run_are_one_history(
    store: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    c: MlflowClient = store["client"]
    default = c.get_experiment_by_name("Default")
    assert default is not None  # where `mlflow run` puts its project run unless told otherwise
    project = c.create_run(default.experiment_id, run_name="bittersweet-owl-42")  # MLflow's random name
    monkeypatch.setenv("MLFLOW_RUN_ID", project.info.run_id)
    adopted = log(store["uri"], 1.0, 1)
    monkeypatch.delenv("MLFLOW_RUN_ID")
    time.sleep(0.01)
    own = log(store["uri"], 1.0, 2)
    assert adopted == project.info.run_id
    assert c.get_run(own).info.experiment_id == default.experiment_id  # side by side in MLflow's UI
    for run_id in (adopted, own):  # named for a person, not "bittersweet-owl-42" or "perflab run 7"
        assert NAME.match(c.get_run(run_id).info.run_name), c.get_run(run_id).info.run_name
    assert latest_suite_run_id(store["uri"]) == own
    _, rows = check_suite(own, tracking_uri=store["uri"])
    (row,) = rows
    assert row.k_used == 1 and c.get_run(row.history_run_ids[0]).data.tags["mlflow.parentRunId"] == adopted
    assert row.status == "no-history" and "a verdict needs 2" in row.reason  # one run shows no spread


def test_a_suite_name_says_chapters_device_and_date() -> None:
    cpu = [result("ch07:x:baseline", [1.0], gpu=None), result("ch01:y:baseline", [1.0], gpu=None)]
    started = time.mktime((2026, 11, 26, 8, 15, 0, 0, 0, -1))
    assert suite_name(cpu, started) == "ch01, ch07 on cpu, 2026-11-26 08:15"
    many = [result(f"ch{i:02d}:x:baseline", [1.0]) for i in range(1, 21)]
    assert suite_name(many, started) == "20 chapters on NVIDIA H100 80GB HBM3, 2026-11-26 08:15"


@pytest.mark.parametrize("scheme", ["sqlite:///{}/x.db", "file://{}/mlruns"])
def test_a_local_store_in_a_missing_directory_is_refused_and_nothing_created(tmp_path: Path, scheme: str) -> None:
    missing = tmp_path / "nonexistent_dir" / "sub"
    uri = scheme.format(missing)
    with pytest.raises(ConfigError, match=re.escape(f"its directory '{missing}' does not exist")):
        check_tracking_uri(uri)
    with pytest.raises(ConfigError):
        client(uri)  # every store open is checked, not only the run command's
    assert not (tmp_path / "nonexistent_dir").exists()


def test_a_sqlite_store_that_is_a_directory_is_refused_at_once(tmp_path: Path) -> None:
    """``sqlite:///DIR`` naming a directory: SQLAlchemy retried opening it for 100 s, printing 37 lines of
    warnings, before the error; refused before MLflow is asked, naming the path."""
    (tmp_path / "store.db").mkdir()
    uri = f"sqlite:///{tmp_path}/store.db"
    started = time.monotonic()
    path = re.escape(f"'{tmp_path}/store.db'")
    with pytest.raises(ConfigError, match=rf"^tracking URI '{re.escape(uri)}': {path} is a directory, not a SQLite "
                                          r"file; accepted: sqlite:///DIR/NAME\.db"):  # fmt: skip
        client(uri)
    assert time.monotonic() - started < 5


def test_stores_that_can_be_opened_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for uri in (None, "", "sqlite:///mlflow.db", f"sqlite:///{tmp_path}/x.db", "sqlite://", "sqlite:///:memory:",
                f"file://{tmp_path}/mlruns", "http://localhost:5000", "HTTPS://host", "databricks", "mlruns",
                "postgresql+psycopg://u@host/db", "mssql://u@host/db", "./a:b"):  # fmt: skip
        check_tracking_uri(uri)


@pytest.mark.parametrize("kind", ["file-store", "random", "text", "truncated"])
def test_a_store_mlflow_cannot_open_is_one_line_naming_it_and_what_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A ``file:`` store (MLflow 3 refuses it: "maintenance mode") or a ``.db`` that is no intact SQLite file: a
    ConfigError (one line, exit status 2) naming the URI, not MLflow's or SQLAlchemy's 300-line traceback."""
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    db = tmp_path / "x.db"
    if kind == "random":
        db.write_bytes(bytes(range(256)) * 20)
    elif kind == "text":
        db.write_text("hello\n")
    elif kind == "truncated":  # a real store cut short: SQLite's header, its pages gone
        with Tracker(experiment="perflab", tracking_uri=f"sqlite:///{db}", run_name="whole"):
            pass
        db.write_bytes(db.read_bytes()[:20000])
    uri = f"file://{tmp_path}/mlruns" if kind == "file-store" else f"sqlite:///{db}"
    with pytest.raises(ConfigError) as err:
        latest_suite_run_id(uri)  # what show, report, compare, regressions and readme read first
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"tracking URI {uri!r}: ") and "sqlite:///PATH.db" in text, text
    assert ("file-system store" in text) == (kind == "file-store"), text
    assert text.count("tracking URI") == 1, text  # said once, not wrapped in itself


@pytest.mark.parametrize("uri", ["bogus://x", "sqlit:///mlflow.db", "htp://host:5000"])
def test_a_scheme_no_store_takes_is_refused_naming_it_and_what_is_accepted(uri: str) -> None:
    scheme = uri.split(":")[0]
    with pytest.raises(ConfigError, match=rf"^tracking URI '{re.escape(uri)}': no MLflow store takes '{scheme}:'; "
                                          r"accepted: a directory, sqlite:///FILE, .*http\(s\)://SERVER"):  # fmt: skip
        client(uri)


def test_reading_a_sqlite_store_that_does_not_exist_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    """``perflab show`` in a fresh directory created ./mlflow.db (and printed MLflow's "Creating initial MLflow
    database tables") before saying no suite was in it: a read of a missing store says so and leaves no file."""
    db = tmp_path / "mlflow.db"
    with pytest.raises(ConfigError, match=r"no MLflow store at .*mlflow\.db.* run a suite first"):
        latest_suite_run_id(f"sqlite:///{db}")
    assert not db.exists()
