"""The MLflow store outside a suite's own logging: reading runs back, and runs that are not a suite's.

``analysis/`` reads runs through these helpers and sees plain data (``StoredRun``), never mlflow's own types;
``log_run`` writes a standalone run (selfcheck, peak), ``log_text_artifacts`` attaches files to an existing
one (a report on its suite's parent). mlflow is imported by the first call that needs it, not with this
module: ``import mlflow`` takes seconds (5.5 s on the H100 host) that a command which never opens the store
must not pay. Only ``bench.record`` imports mlflow.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

from bench.errors import ConfigError
from bench.record.contract import name, param_value
from bench.record.stored import PARENT_RUN_ID, StoredRun, stored_run
from bench.record.unopened import damaged, reads, sqlite_path, unopened

# MLflow's own default experiment: where `mlflow run . -e chapter` puts its project run (the suite's parent)
# unless told otherwise, so that both entry points land side by side.
DEFAULT_EXPERIMENT = "Default"


def client(tracking_uri: str | None = None) -> Any:
    """An ``MlflowClient`` of the store at ``tracking_uri`` (None: MLflow decides, ``MLFLOW_TRACKING_URI`` or
    ./mlflow.db); ``ConfigError`` for a local store whose directory does not exist (``check_tracking_uri``), and
    for a store MLflow cannot open (a ``file:`` store, a ``.db`` that is not an intact SQLite file)."""
    check_tracking_uri(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"))
    # A tracking server's client prints "View run ... at: http://..." on every run it ends: not ours to show.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    from mlflow import MlflowClient

    try:
        return MlflowClient(tracking_uri=tracking_uri)  # opens the store: a SQLite file is read here
    except Exception as exc:
        raise ConfigError(unopened(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"), exc)) from None


def results_dir() -> Path:
    """Where perflab's commands write files of their own (reports, CSVs, plots, a sweep's data and study):
    ``$PERFLAB_RESULTS_DIR``, else ``./perflab-results`` (git-ignored), never loose in a checkout."""
    return Path(os.environ.get("PERFLAB_RESULTS_DIR") or "perflab-results")


def check_tracking_uri(uri: str | None) -> None:
    """A local store (``sqlite:`` or ``file:``) must be put in a directory that exists: SQLAlchemy and MLflow
    would create the missing ones, at the filesystem root for ``sqlite:////nonexistent_dir/sub/x.db``, and a
    typo would scatter stores. ``ConfigError`` naming the directory; other URIs (servers) pass. No mlflow
    import: a command checks before anything starts."""
    if not uri:
        return
    scheme = uri.partition(":")[0]
    _check_scheme(uri, scheme if ":" in uri else "")
    if scheme == "file":
        from urllib.parse import unquote, urlparse

        path: str | None = unquote(urlparse(uri).path)  # the store's own directory is created; its parent must exist
    elif (path := sqlite_path(uri)) is None:  # a server, an in-memory SQLite store
        return
    directory = Path(path).parent
    if not directory.is_dir():
        raise ConfigError(f"tracking URI {uri!r}: its directory {str(directory)!r} does not exist; create it or "
                          "choose another store (--tracking-uri or MLFLOW_TRACKING_URI)")  # fmt: skip
    if scheme == "sqlite" and Path(path).is_dir():  # SQLAlchemy would retry opening it for 100 s, then fail
        raise ConfigError(f"tracking URI {uri!r}: {path!r} is a directory, not a SQLite file; accepted: "
                          "sqlite:///DIR/NAME.db (a new name makes a new store) or a server "
                          "http(s)://HOST")  # fmt: skip


# MLflow's own tracking stores by URI scheme (a database's may name its driver: postgresql+psycopg)
_SCHEMES = ("file", "sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks", "databricks-uc", "uc")


def _check_scheme(uri: str, scheme: str) -> None:
    """A ConfigError for a URI whose scheme no tracking store takes (MLflow's or a plugin's): MLflow would refuse
    it only when the suite's results are logged."""
    import re
    from importlib.metadata import entry_points

    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme or "-"):
        return  # a path
    base = scheme.lower().split("+", 1)[0]
    if base in _SCHEMES or base in {e.name for e in entry_points(group="mlflow.tracking_store")}:
        return
    raise ConfigError(
        f"tracking URI {uri!r}: no MLflow store takes {scheme + ':'!r}; accepted: a directory, sqlite:///FILE, "
        "postgresql://…, mysql://…, mssql://…, http(s)://SERVER, file:DIR, databricks"
    )


def experiment_name(experiment: str | None) -> str:
    """``experiment``, else ``MLFLOW_EXPERIMENT_NAME``, else MLflow's "Default"."""
    return experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT


@reads
def suite_runs(parent_run_id: str | None = None, tracking_uri: str | None = None) -> tuple[str, list[Any]]:
    """The variant runs of one suite (when ``parent_run_id`` is None the latest that completed or that its
    --suite-timeout ended).

    Returns ``(parent_run_id, runs)`` with runs sorted by name; what ``perflab show`` tabulates.
    """
    store = client(tracking_uri)
    experiments = [e.experiment_id for e in store.search_experiments()]
    if parent_run_id is None:  # a suite cut short by --suite-timeout shows what finished
        parent_run_id = latest_suite_run_id(tracking_uri, ("completed", "timeout"))
    runs = store.search_runs(experiments, filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'")
    return parent_run_id, sorted(runs, key=lambda r: r.info.run_name or "")


# log_batch limits: 1000 entities in all, of which at most 100 params and 100 tags.
_BATCH_METRICS = 800
_BATCH_PARAMS_TAGS = 100


def log_batch(
    store: Any, run_id: str, metrics: Mapping[str, float] | None = None, params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None, ts: int | None = None,
) -> None:  # fmt: skip
    """One ``log_batch`` per run when it fits; chunked to the store's per-call limits otherwise. ``ts``: the
    metrics' timestamp (ms; default now): the same on a second attempt, so the store keeps one entry."""
    from mlflow.entities import Metric, Param, RunTag

    ts = ts if ts is not None else int(time.time() * 1000)
    ms = [Metric(k, v, ts, 0) for k, v in (metrics or {}).items()]
    ps = [Param(k, v) for k, v in (params or {}).items()]
    rts = [RunTag(k, v) for k, v in (tags or {}).items()]
    calls = max(1, -(-len(ms) // _BATCH_METRICS), -(-max(len(ps), len(rts)) // _BATCH_PARAMS_TAGS))
    for i in range(calls):
        m = slice(i * _BATCH_METRICS, (i + 1) * _BATCH_METRICS)
        b = slice(i * _BATCH_PARAMS_TAGS, (i + 1) * _BATCH_PARAMS_TAGS)
        store.log_batch(run_id, metrics=ms[m], params=ps[b], tags=rts[b])


def artifact_repo(store: Any, artifact_uri: str) -> Any:
    """The artifact repository of a run whose ``artifact_uri`` is known (``create_run`` answers it): what
    ``MlflowClient.log_artifact`` uses, without the ``get_run`` round trip it makes to find it."""
    import inspect

    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.utils.uri import add_databricks_profile_info_to_artifact_uri

    uri = add_databricks_profile_info_to_artifact_uri(artifact_uri, store.tracking_uri)
    if "tracking_uri" in inspect.signature(get_artifact_repository).parameters:  # older MLflow: the URI only
        return get_artifact_repository(uri, tracking_uri=store.tracking_uri)
    return get_artifact_repository(uri)


def log_run(
    run_name: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    artifacts: Mapping[str, str],
    tags: Mapping[str, str] | None = None,
    experiment: str | None = None,
    tracking_uri: str | None = None,
) -> str:
    """One standalone run (selfcheck, peak): params, finite metrics, text artifacts ``{name: content}``."""
    from mlflow.entities import Metric, Param, RunStatus

    store = client(tracking_uri)
    wanted = experiment_name(experiment)
    found = store.get_experiment_by_name(wanted)
    experiment_id = found.experiment_id if found else store.create_experiment(wanted)
    run = store.create_run(experiment_id, run_name=run_name, tags=dict(tags or {}))
    run_id = run.info.run_id
    store.log_batch(
        run_id,
        metrics=[Metric(name(k), float(v), int(time.time() * 1000), 0) for k, v in metrics.items() if math.isfinite(v)],
        params=[Param(name(k), param_value(v)) for k, v in params.items()],
    )
    with tempfile.TemporaryDirectory() as tmp:
        for fname, content in artifacts.items():
            path = Path(tmp) / fname
            path.write_text(content)
            store.log_artifact(run_id, str(path))
    store.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run_id


# ------------------------------------------------------------------------------ reading the store back


def _quoted(value: str) -> str:
    """A value for an MLflow filter string; the filter grammar has no escape for quotes."""
    if "'" in value:
        raise ValueError(f"cannot search MLflow for a value containing a quote: {value!r}")
    return f"'{value}'"


def find_run(store: Any, experiment_id: str, tags: Mapping[str, str]) -> Any:
    """The first run (mlflow's ``Run``) of an experiment that carries every tag in ``tags``, or None."""
    where = " and ".join(f"tags.`{k}` = {_quoted(v)}" for k, v in tags.items())
    runs = store.search_runs([experiment_id], filter_string=where, max_results=1)
    return runs[0] if runs else None


def run_exists(store: Any, run_id: str) -> bool:
    from mlflow.exceptions import MlflowException

    try:
        store.get_run(run_id)
    except MlflowException:
        return False
    return True


@reads
def latest_suite_run_id(tracking_uri: str | None = None, statuses: tuple[str, ...] = ("completed",)) -> str:
    """Id of the most recently started suite that ended in one of ``statuses`` (``perflab.suite_status``:
    "completed"; "timeout" for a suite its --suite-timeout cut short, what finished kept), passing over one that
    logged no variant (stopped before any finished)."""
    store = client(tracking_uri)
    experiments = [e.experiment_id for e in store.search_experiments()]
    found = []
    for status in statuses:
        runs = store.search_runs(experiments, filter_string=f"tags.`perflab.suite_status` = '{status}'",
                                 order_by=["attributes.start_time DESC"], max_results=20)  # fmt: skip
        found += [run for run in runs if run.data.metrics.get("n_variants") != 0][:1]
    if not found:
        raise LookupError(f"no {' or '.join(statuses)} perflab suite in the store {store.tracking_uri!r}")
    return str(max(found, key=lambda r: r.info.start_time).info.run_id)


@reads
def read_run(run_id: str, tracking_uri: str | None = None) -> StoredRun:
    """One run by id, or by a unique prefix of ``SHORT_ID`` or more of its hex digits (the short id chart titles
    show); its ``run_id`` the whole id. ``LookupError`` naming the id and the store when no run has it, or how many
    runs a prefix matches when it is not unique."""
    from mlflow.exceptions import MlflowException

    store = client(tracking_uri)
    try:
        return stored_run(store.get_run(_whole_id(store, run_id)))
    except MlflowException as exc:
        if damaged(exc):
            raise  # the store's fault, not the id's (reads)
        raise LookupError(
            f"no MLflow run {run_id!r} in the store {store.tracking_uri!r}: a run id is the 32 hex "
            'digits `perflab run` printed ("MLflow parent run …") or the MLflow UI shows, or a '
            f"unique prefix of {SHORT_ID} or more of them"
        ) from exc


SHORT_ID = 8  # the fewest hex digits of a run id taken as its prefix (chart titles show 8)


def _whole_id(store: Any, run_id: str) -> str:
    """The id of the one run whose id starts with ``run_id`` (``SHORT_ID`` to 31 hex digits); ``run_id`` itself
    when it is no such prefix or no run has it (``get_run`` then says so); ``LookupError`` when several do."""
    prefix = run_id.lower()
    if not SHORT_ID <= len(prefix) < 32 or prefix.strip("0123456789abcdef"):
        return run_id
    found = store.search_runs([e.experiment_id for e in store.search_experiments()],
                              filter_string=f"attributes.run_id LIKE '{prefix}%'", max_results=100)  # fmt: skip
    if len(found) > 1:
        many = f"{len(found)}{' or more' if len(found) == 100 else ''}"
        raise LookupError(f"run id prefix {run_id!r} matches {many} runs in the store {store.tracking_uri!r}; "
                          "give more of its digits")  # fmt: skip
    return str(found[0].info.run_id) if found else run_id


def child_runs(parent_run_id: str, tracking_uri: str | None = None) -> list[StoredRun]:
    """The nested runs of a parent run, sorted by name."""
    _, runs = suite_runs(parent_run_id, tracking_uri)
    return [stored_run(r) for r in runs]


@reads
def benchmark_runs(
    experiment_id: str | None, chapter: str, example: str, variant: str, tracking_uri: str | None = None
) -> list[StoredRun]:
    """Every run of one benchmark variant in an experiment (None: in every experiment of the store, where
    suites of ``perflab run`` and of ``mlflow run`` both are), newest first, whatever its status."""
    store = client(tracking_uri)
    keys = {"chapter": chapter, "example": example, "variant": variant}
    where = " and ".join(f"tags.`perflab.{k}` = {_quoted(v)}" for k, v in keys.items())
    experiments = [experiment_id] if experiment_id else [e.experiment_id for e in store.search_experiments()]
    # search_runs returns at most 1000 runs: far more history than a regression check uses.
    runs = store.search_runs(experiments, filter_string=where, order_by=["attributes.start_time DESC"])
    return [stored_run(r) for r in runs]


@reads
def tagged_runs(
    tags: Mapping[str, str], tracking_uri: str | None = None, max_results: int = 100, also: str | None = None
) -> list[StoredRun]:
    """Runs of any experiment that carry every tag in ``tags`` (e.g. the peak runs of one hardware key), and
    match the filter clause ``also`` when given, newest first."""
    store = client(tracking_uri)
    where = " and ".join([*(f"tags.`{k}` = {_quoted(v)}" for k, v in tags.items()), *([also] if also else [])])
    runs = store.search_runs(
        [e.experiment_id for e in store.search_experiments()],
        filter_string=where,
        order_by=["attributes.start_time DESC"],
        max_results=max_results,
    )
    return [stored_run(r) for r in runs]


@reads
def read_artifact_text(run_id: str, path: str, tracking_uri: str | None = None) -> str:
    """A text artifact of a run (``result.json``, ``manifest.json``); ``LookupError`` when missing."""
    from mlflow.exceptions import MlflowException

    store = client(tracking_uri)
    # MLflow draws a progress bar per download on stderr: noise for a command reading dozens of files.
    quiet = {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    with tempfile.TemporaryDirectory(prefix="perflab-") as tmp, mock.patch.dict(os.environ, quiet):
        try:
            local = store.download_artifacts(run_id, path, tmp)
        except (MlflowException, OSError) as exc:
            raise LookupError(f"run {run_id!r} has no artifact {path!r} in the store {store.tracking_uri!r}") from exc
        return Path(local).read_text()


def log_text_artifacts(run_id: str, files: Mapping[str, str | bytes], tracking_uri: str | None = None) -> None:
    """Attach files ``{name: text or bytes}`` to an existing run (a report and its PNGs on the parent)."""
    store = client(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
        for name, content in files.items():
            path = Path(tmp) / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        store.log_artifacts(run_id, tmp)


def discard_refused_run(run_id: str, tracking_uri: str | None = None, wait_s: float = 60.0) -> bool:
    """Delete the run ``mlflow run`` opened for a perflab command that refused its input before doing anything
    (a malformed ``-P ch=...``): left alone, it stays FAILED in the history, a failure for a typo. ``mlflow run``
    ends the run itself once the command has exited (FAILED, whatever the command set: MLflow 3 compares the
    status's name with numbers), and ending a deleted run raises; so this runs in a process of its own, waits up
    to ``wait_s`` for that end, then deletes. Only a project run (tag ``mlflow.project.entryPoint``) that nothing
    was logged to (no perflab tag, metric or nested run) is deleted; True when it was."""
    store = client(tracking_uri)
    deadline = time.monotonic() + wait_s
    run = store.get_run(run_id)
    while run.info.status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
        run = store.get_run(run_id)
    data = run.data
    if run.info.status == "RUNNING" or run.info.lifecycle_stage != "active" or data.metrics:
        return False
    if "mlflow.project.entryPoint" not in data.tags or any(k.startswith("perflab.") for k in data.tags):
        return False
    if store.search_runs([run.info.experiment_id], f"tags.`{PARENT_RUN_ID}` = {_quoted(run_id)}", max_results=1):
        return False
    store.delete_run(run_id)
    return True
