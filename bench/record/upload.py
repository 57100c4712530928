"""A spool's results into the MLflow store: idempotent uploads, bounded retries, one line when the store fails.

``Uploader.attempt`` makes one pass over a spool (``bench.record.spool``): the parent run, every entry not
uploaded yet, the suite's end; it stops at the first error and records it in full in the spool's ``errors.log``.
``SpoolSink`` is what ``perflab run`` logs through (fed by ``bench.isolate.sink.BackgroundSink``, whose ``keep``
is ``Spool.add``): it tries again with a bounded backoff while the suite runs, and at the suite's end waits for
a store that failed for at most ``$PERFLAB_STORE_WAIT_S`` (30 s) before it leaves the results to
``perflab import``. ``import_spools`` is that command's work.

A store that failed is *down* (a connection refused or timed out, a 5xx answer, a locked SQLite file: tried
again) or *unwritable* (a 4xx answer, a SQLite file that cannot be opened or written: not tried again in this
command). MLflow's own retries are cut to none (``MLFLOW_HTTP_REQUEST_MAX_RETRIES=0``, a 20 s timeout per
request, unless set) so that the retrying, and what the console shows of it, is ours: MLflow's, SQLAlchemy's and
urllib3's retry warnings are not shown.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
import traceback
from pathlib import Path
from typing import Any

from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.errors import PerflabError
from bench.record.spool import Spool, absolute_uri, find_spools
from bench.record.summary import summary_dict, summary_markdown
from bench.record.tracking import Tracker

__all__ = ["SpoolSink", "Uploader", "import_spools", "quiet_store", "store_problem"]

_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)  # seconds between tries of a store that is down; then every 15 s
_WAIT_S = 30.0  # at a suite's end, how long a store that is down is waited for ($PERFLAB_STORE_WAIT_S)
# Retry warnings that would otherwise fill the console for minutes (MLflow's SQLAlchemy engine retries, urllib3's).
_NOISY_LOGGERS = ("urllib3", "mlflow.store.db.utils", "mlflow.utils.request_utils", "mlflow.utils.rest_utils",
                  "alembic", "sqlalchemy")  # fmt: skip
_UNWRITABLE = ("readonly database", "read-only", "unable to open database", "permission denied", "no space left")


def quiet_store() -> None:
    """MLflow's retries off (ours instead), a bounded wait per request, the store's retry warnings off."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def store_problem(tracking_uri: str | None) -> str | None:
    """Why a SQLite store cannot be written, found in milliseconds (MLflow itself retries for 100 s); None when
    it can, or when the store is not SQLite."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or ""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :].split("?", 1)[0]
    if path in ("", ":memory:"):
        return None
    try:
        db = sqlite3.connect(path, timeout=5, isolation_level=None)  # creates the file, as MLflow would
        try:
            db.execute("BEGIN IMMEDIATE")  # the write lock, nothing written
            db.execute("ROLLBACK")
        finally:
            db.close()
    except sqlite3.Error as exc:
        return f"SQLite file {path} cannot be written: {exc}"
    return None


class StoreUnwritable(Exception):
    """The store refuses writes (``store_problem``); not tried again."""


def transient(exc: BaseException) -> bool:
    """Whether a store that raised ``exc`` may take the same call later: down or slow, not unwritable."""
    text = str(exc).lower()
    if isinstance(exc, StoreUnwritable) or any(s in text for s in _UNWRITABLE):
        return False
    if "database is locked" in text:
        return True
    from mlflow.exceptions import MlflowException

    if isinstance(exc, MlflowException):
        status = exc.get_http_status_code()
        return status >= 500 or status == 429
    import requests

    return isinstance(exc, ConnectionError | TimeoutError | requests.RequestException)


def one_line(exc: BaseException) -> str:
    """The gist of a store's error in one line: MLflow's connection errors run to a paragraph."""
    text = str(exc)
    if isinstance(exc, StoreUnwritable):
        return text
    for marker in ("[Errno", "Read timed out", "Connection refused", "Name or service not known"):
        i = text.find(marker)
        if i >= 0:
            end = min((j for j in (text.find(c, i) for c in ")'\"") if j > i), default=len(text))
            return f"{type(exc).__name__}: {text[i:end].strip('[] ')}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    gist = f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__
    status = getattr(exc, "get_http_status_code", lambda: None)()
    if status in (401, 403):  # a team's server (docs/team.md) wants a user of its own
        return (f"{gist} (the server refused this host's credentials: ~/.mlflow/credentials, or "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD; docs/team.md)")  # fmt: skip
    return gist


class Uploader:
    """Uploads one spool; ``attempt`` makes one pass, never raises for the store's errors (``error`` holds the
    last one, ``down`` whether it may pass later)."""

    def __init__(self, spool: Spool, tracking_uri: str | None = None, experiment: str | None = None) -> None:
        self.spool = spool
        self.tracking_uri = tracking_uri or spool.suite.get("tracking_uri")
        self.experiment = experiment or spool.suite.get("experiment")
        self.tracker: Tracker | None = None
        self.error: BaseException | None = None
        self.uploaded = 0  # variant runs logged by this uploader (or found logged by an earlier one)

    @property
    def down(self) -> bool:
        return self.error is not None and transient(self.error)

    def pending(self) -> int:
        """Entries not in the store yet, plus the suite's end when it is written but not uploaded."""
        ending = self.spool.ending()
        end = 1 if ending is not None and ending.get("run_id") is None else 0
        return sum(e.run_id is None for e in self.spool.entries()) + end

    def attempt(self) -> None:
        try:
            if self.tracker is None and (problem := store_problem(self.tracking_uri)):
                raise StoreUnwritable(problem)
            tracker = self._open()
            for e in self.spool.entries():
                if e.run_id is not None:
                    continue
                resume = e.attempted  # an earlier try may have made its run: looked up by uid
                if not resume:
                    e.attempted = True
                    e.save()
                e.run_id = tracker.log_variant(e.result(), e.comparison(), uid=e.uid, resume=resume,
                                               ended_ms=e.ended_ms, profile_dir=e.profile_dir,
                                               files=e.files_dir)  # fmt: skip
                e.save()
                self.uploaded += 1
            ending = self.spool.ending()
            if ending is not None and ending.get("run_id") is None and not tracker.finished:
                tracker.finish(ending["summary_md"], ending["summary_json"], failed=bool(ending["failed"]),
                               ended_ms=int(ending["ended_ms"]),
                               interrupted=bool(ending.get("interrupted")))  # fmt: skip
            if ending is not None and ending.get("run_id") is None:
                self.spool.ended(tracker.parent_run_id)
            self.error = None
        except Exception as exc:  # the store's fault, whatever MLflow raised: kept for the next try and the line
            self.error = exc
            self.spool.note_error(f"{self.tracking_uri or 'MLflow default store'}: {traceback.format_exc()}")

    def _open(self) -> Tracker:
        """The parent run: made once, found again (by its uid) by any later try."""
        if self.tracker is not None:
            return self.tracker
        suite = self.spool.suite
        tracker = Tracker(
            experiment=self.experiment, tracking_uri=self.tracking_uri, run_name=suite.get("run_name"),
            host_manifest=suite.get("host") or {}, tags=suite.get("tags") or {}, uid=self.spool.uid,
        )  # fmt: skip
        resume = bool(suite.get("attempted"))
        if not resume:
            suite["attempted"] = True
            self.spool.save_suite()
        tracker.start(resume=resume, adopt=suite.get("adopt"), started_ms=suite.get("created_ms"))
        if suite.get("parent_run_id") not in (None, tracker.parent_run_id):
            # Another store than the one the entries went to (or their parent is gone): every entry is looked
            # up by its uid there, and logged when absent.
            for e in self.spool.entries():
                e.run_id, e.attempted = None, True
                e.save()
        suite["parent_run_id"] = tracker.parent_run_id
        suite["tracking_uri"] = suite.get("tracking_uri") or absolute_uri(tracker.tracking_uri)  # MLflow's default
        self.spool.save_suite()
        for e in self.spool.entries():
            if e.run_id is not None:  # uploaded by an earlier process: counted in the summary, named as baseline
                tracker.record(e.result(), e.comparison(), e.run_id)
        self.tracker = tracker
        return tracker


def store_wait_s() -> float:
    """``$PERFLAB_STORE_WAIT_S`` (seconds, >= 0), else 30; a PerflabError naming a bad value (``perflab run`` checks
    it before the suite starts, not at its end)."""
    raw = os.environ.get("PERFLAB_STORE_WAIT_S") or ""
    try:
        value = float(raw) if raw.strip() else _WAIT_S
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise PerflabError(f"PERFLAB_STORE_WAIT_S={raw!r} is not a number of seconds >= 0")
    return value


class SpoolSink:
    """The suite's sink: results are in the spool already (``Spool.add``); this uploads them, trying a store that
    is down again with a bounded backoff, on the ``BackgroundSink``'s thread."""

    def __init__(self, spool: Spool, uploader: Uploader) -> None:
        self.spool = spool
        self.uploader = uploader
        self._failures = 0
        self._next_try = 0.0
        self._try()  # opens the store: MLflow's import and the parent run, on the sink's thread

    @property
    def parent_run_id(self) -> str | None:
        return self.uploader.tracker.parent_run_id if self.uploader.tracker is not None else None

    @property
    def tracking_uri(self) -> str | None:
        return self.uploader.tracker.tracking_uri if self.uploader.tracker is not None else self.uploader.tracking_uri

    @property
    def experiment_name(self) -> str | None:
        """The parent run's experiment (an adopted run's, not the one asked for) once the store is open."""
        if self.uploader.tracker is not None:
            return self.uploader.tracker.experiment_name
        return self.uploader.experiment

    def _try(self) -> None:
        if self.uploader.error is not None and not self.uploader.down:
            return  # unwritable: not tried again in this command
        if time.monotonic() < self._next_try:
            return
        self.uploader.attempt()
        if self.uploader.error is None:
            self._failures = 0
        else:
            self._next_try = time.monotonic() + _BACKOFF_S[min(self._failures, len(_BACKOFF_S) - 1)]
            self._failures += 1

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str:
        self._try()
        return self.spool.entry(result.spec.key).run_id or ""

    def tick(self) -> None:
        if self.uploader.pending():
            self._try()

    def finish(
        self, summary_md: str, summary_json: dict[str, Any], failed: bool = False, wait: bool = True,
        interrupted: bool = False,
    ) -> str | None:  # fmt: skip
        """The suite's end: uploaded with everything still pending, waiting up to ``$PERFLAB_STORE_WAIT_S`` for a
        store that is down (not with ``wait=False``). The spool is removed once all of it is in the store; else
        returns the one line that says where the results are and how to upload them."""
        self.spool.end(summary_md, summary_json, failed, interrupted)
        deadline = time.monotonic() + (store_wait_s() if wait else 0.0)
        self._next_try = 0.0
        while True:
            self._try()
            if self.uploader.pending() == 0:
                self.spool.remove()
                return None
            if not self.uploader.down or self._next_try > deadline:
                return spooled_line(self.spool, self.uploader)
            time.sleep(max(0.0, self._next_try - time.monotonic()))


def spooled_line(spool: Spool, uploader: Uploader) -> str:
    where = _shown(spool.root)
    kind = "is down" if uploader.down else "cannot be written"
    error = one_line(uploader.error) if uploader.error is not None else "unknown error"
    store = uploader.tracking_uri or "MLflow's default store"
    entries = spool.entries()
    waiting = sum(e.run_id is None for e in entries)
    return (f"results not logged: the MLflow store {store} {kind} ({error}); {waiting} of {len(entries)} variant "
            f"results and the summary are in {where}: upload them with `perflab import {where}`")  # fmt: skip


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def import_spools(path: str | Path, tracking_uri: str | None = None, experiment: str | None = None,
                  tries: int = 3) -> list[tuple[bool, str]]:  # fmt: skip
    """``perflab import``: upload each spool at ``path`` (one, or a directory of them); ``(ok, line)`` per spool.

    A spool whose suite never ended (its command was killed) gets the summary of what it holds and ends FAILED.
    ``tracking_uri``/``experiment``: default, where the suite meant to log. A store that is down is tried
    ``tries`` times, a few seconds apart."""
    quiet_store()
    out = []
    for spool in find_spools(path):
        if spool.ending() is None:
            suite = SuiteResult(
                variants=[e.result() for e in spool.entries()],
                comparisons=[c for e in spool.entries() if (c := e.comparison()) is not None],
            )
            summary = summary_dict(suite)
            note = "# perflab summary\n\nThe suite's command ended before the suite did; these variants finished.\n\n"
            spool.end(note + summary_markdown(summary), summary, failed=True)
        uploader = Uploader(spool, tracking_uri, experiment)
        for n in range(tries):
            uploader.attempt()
            if uploader.error is None or not uploader.down or n == tries - 1:
                break
            time.sleep(_BACKOFF_S[min(n, len(_BACKOFF_S) - 1)])
        where = _shown(spool.root)
        if uploader.error is None and uploader.pending() == 0:
            spool.remove()
            out.append((True, f"{where}: {len(spool.entries())} variant runs in parent run "
                              f"{spool.suite['parent_run_id']} of {uploader.tracker.tracking_uri}"))  # type: ignore[union-attr]  # fmt: skip
        else:
            out.append((False, spooled_line(spool, uploader)))
    return out
