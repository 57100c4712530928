"""MLflow tracking of a suite: one parent run per invocation, one nested run per variant.

It uses ``MlflowClient`` with explicit run ids rather than the fluent ``mlflow.start_run`` API, because the
fluent API keeps a global active-run stack that several workers logging variants (from several threads)
would have to juggle, and because ``log_batch`` writes a variant's metrics, params and tags in one call.
Only the parent process tracks: mlflow's import is slow and its store must be opened once, not in every
child; it is imported when a ``Tracker`` is made (``bench.record.store.client``), on a thread of its own
during a suite (``bench.isolate.sink``).

What goes where (and what readers of the store may rely on; docs/mlflow.md):

* Parent run — the suite. Adopted from ``MLFLOW_RUN_ID`` when set (inside ``mlflow run``, which
  owns and terminates that run); otherwise created here and terminated by ``finish``: FINISHED when
  the suite completed, *even if variants failed* (their failures are data, recorded per variant),
  FAILED/KILLED only when the suite itself crashed or was interrupted. A suite's parent without a
  name of the caller's (``run_name=None``), adopted ones included (MLflow names them at random), is
  named for a person: its chapters, device and start (``ch07 on cpu, 2026-11-26 08:15``), by ``finish``.
* Variant run — nested (``mlflow.parentRunId``), named ``chapter:example:variant``; its tags, metrics and
  params are ``bench.record.contract``'s; artifacts ``result.json`` (full result, raw samples) and
  ``manifest.json``. A variant that failed, timed out or was skipped logs what was measured, nothing else.
* Parents whose children are not variants (sweep trials, kernel providers): ``log_parent``, ``log_child``,
  ``close``.

Idempotent with uids (``bench.record.spool``): runs carry ``perflab.uid``; ``resume=True`` fills the run an
earlier attempt made (the store failed mid-way), with the same timestamps: nothing is logged twice.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.define.result import Comparison, VariantResult
from bench.record.contract import (
    FAILED_STATUSES,
    MAX_TAG_LEN,
    clip,
    commit_tags,
    context_tags,
    finite,
    host_tags,
    suite_counts,
    suite_name,
    suite_tags,
    suite_time_metrics,
    variant_files,
    variant_metrics,
    variant_params,
    variant_tags,
)
from bench.record.contract import params as as_params
from bench.record.pairs import comparison_metrics, comparison_tags
from bench.record.store import PARENT_RUN_ID, artifact_repo, client, experiment_name, find_run, log_batch, run_exists

__all__ = ["Tracker"]

_log = logging.getLogger(__name__)

# MLflow's run statuses (mlflow.entities.RunStatus), as set_terminated takes them.
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"
UID = "perflab.uid"  # a run's identity across attempts to log it (bench.record.spool)


class Tracker:
    """Logs one suite invocation to MLflow: a parent run and a nested run per variant.

    Use as a context manager (``with Tracker(...) as t:``) so a crash marks the parent FAILED;
    call ``finish`` with the summary when the suite completed. ``log_variant`` may be called from
    several threads (the scheduler runs one queue per GPU); the counters it keeps are locked.
    """

    def __init__(
        self, experiment: str | None = None, tracking_uri: str | None = None, run_name: str | None = None,
        host_manifest: dict[str, Any] | None = None, tags: dict[str, str] | None = None, uid: str | None = None,
    ) -> None:  # fmt: skip
        """``tracking_uri=None`` lets MLflow decide (``MLFLOW_TRACKING_URI``, else ./mlflow.db).

        ``experiment=None`` uses ``MLFLOW_EXPERIMENT_NAME`` when set, else "perflab"; it is ignored
        when a parent run is adopted from ``MLFLOW_RUN_ID`` (that run's experiment wins).
        ``tags`` go on the parent and on every variant run, so variant searches can filter on them.
        ``uid``: the parent's ``perflab.uid`` (``start(resume=True)`` finds the parent by it).
        """
        self._client = client(tracking_uri)
        self._uid = uid
        self._experiment_name = experiment_name(experiment)
        self._run_name = run_name
        self._host_manifest = host_manifest or {}
        self._tags = {k: str(v) for k, v in (tags or {}).items()}
        self._parent_run_id: str | None = None
        self._experiment_id: str | None = None
        self._started = time.time()
        self._owns_parent = False
        self._finished = False
        self._context_tags: dict[str, str] = {}
        self._lock = threading.Lock()
        self._results: list[VariantResult] = []
        self._comparisons: list[Comparison] = []
        self._run_ids: dict[str, str] = {}  # variant key → run id, to link optimized runs to baselines
        self._uploads = ThreadPoolExecutor(max_workers=3, thread_name_prefix="perflab-upload")  # threads made on use

    @property
    def parent_run_id(self) -> str:
        if self._parent_run_id is None:
            raise RuntimeError("Tracker has no parent run yet; call start() or use 'with Tracker(...) as t'")
        return self._parent_run_id

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            raise RuntimeError("Tracker has no experiment yet; call start() or use 'with Tracker(...) as t'")
        return self._experiment_id

    @property
    def finished(self) -> bool:
        """The parent run has ended (``finish``, or an earlier attempt's, found by ``start(resume=True)``)."""
        return self._finished

    @property
    def tracking_uri(self) -> str:
        return self._client.tracking_uri

    @property
    def experiment_name(self) -> str:
        """The experiment the parent run is in (an adopted run's, not the one asked for)."""
        return str(self._client.get_experiment(self.experiment_id).name)

    def run_id(self, key: str) -> str | None:
        """Run id of a variant logged by this tracker, by ``chapter:example:variant``."""
        return self._run_ids.get(key)

    def start(self, resume: bool = False, adopt: str | None = None, started_ms: int | None = None) -> str:
        """Open (or adopt) the parent run and return its id; calling it again returns the same id.

        ``resume``: an earlier attempt may have created the parent (its answer lost): the run holding this
        tracker's uid is taken, when there is one. ``adopt``: the id of a run that is not ours to end (the
        ``mlflow run`` project run a spooled suite was filling), used when the store has it. ``started_ms``:
        when the suite began (default now).
        """
        if self._parent_run_id is not None:
            return self._parent_run_id
        if started_ms is not None:  # a spooled suite: named for when it began, not when it was uploaded
            self._started = started_ms / 1000
        import os

        from mlflow.tracking.context.registry import resolve_tags

        adopted = os.environ.get("MLFLOW_RUN_ID") or (adopt if adopt and run_exists(self._client, adopt) else None)
        found = None if adopted or not resume else self._find(self._uid, None)
        if found is not None:
            self._experiment_id, self._parent_run_id = found.info.experiment_id, found.info.run_id
            self._owns_parent = True
            self._finished = found.info.status != "RUNNING"  # ended by an earlier attempt: not ended again
            self._context_tags = context_tags(found.data.tags)
        elif adopted:
            # Inside `mlflow run`: the project run is ours to fill, not to create or terminate.
            run = self._client.get_run(adopted)
            self._experiment_id = run.info.experiment_id
            self._parent_run_id = run.info.run_id
            self._owns_parent = False
            self._context_tags = context_tags(run.data.tags)
            tags = {**self._tags, **commit_tags(self._host_manifest), **self._uid_tag(self._uid)}
            if tags:
                self._log(self._parent_run_id, tags=tags)
            if self._run_name is None:  # MLflow's random name until finish() names it for its results
                self._client.update_run(self._parent_run_id, name=self._provisional_name())
        else:
            self._experiment_id = self._get_or_create_experiment(self._experiment_name)
            context = resolve_tags()  # user, source file, git commit: what fluent runs get for free
            self._context_tags = context_tags(context)
            tags = {**context, **self._tags, **commit_tags(self._host_manifest), **self._uid_tag(self._uid)}
            name = self._run_name or self._provisional_name()
            run = self._client.create_run(self._experiment_id, start_time=started_ms, run_name=name, tags=tags)
            self._parent_run_id = run.info.run_id
            self._owns_parent = True
        return self._parent_run_id

    @staticmethod
    def _uid_tag(uid: str | None) -> dict[str, str]:
        return {UID: uid} if uid else {}

    def _find(self, uid: str | None, parent: str | None) -> Any:
        """The run carrying ``uid`` (under ``parent``, when given), or None."""
        if uid and self._experiment_id is None:
            exp = self._client.get_experiment_by_name(self._experiment_name)
            self._experiment_id = exp.experiment_id if exp is not None else None
        if not uid or self._experiment_id is None:
            return None
        return find_run(self._client, self._experiment_id, {UID: uid, **({PARENT_RUN_ID: parent} if parent else {})})

    def _provisional_name(self) -> str:
        """What a suite is called until its results name it: its targets and start."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self._started))
        return f"{self._tags.get('perflab.targets', 'perflab')}, {when}"

    def _get_or_create_experiment(self, name: str) -> str:
        from mlflow.exceptions import MlflowException

        exp = self._client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        try:
            return self._client.create_experiment(name)
        except MlflowException:
            # Another process created it between our lookup and create (parallel suites, one store).
            exp = self._client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def log_variant(
        self, result: VariantResult, comparison: Comparison | None = None, *, uid: str | None = None,
        resume: bool = False, ended_ms: int | None = None, profile_dir: str | None = None, files: str | None = None,
    ) -> str:  # fmt: skip
        """Log one variant as a nested run and return its id.

        ``comparison`` is the pair this (optimized) variant belongs to; it adds ``speedup``,
        ``max_rel_error`` and the verification tags. The variant run ends FAILED when the variant
        failed, timed out or was invalid (so the MLflow UI flags it), FINISHED otherwise; the
        precise outcome is always in the ``perflab.status`` tag.

        ``ended_ms``: when the variant's run ended (ms since the epoch; default now): the run's start, end and
        metrics' timestamps, so a result uploaded later reads as measured when it was. ``uid``, ``resume``: see
        the module's docstring. ``profile_dir``, ``files``: the profile's and the variant's files, when moved elsewhere.
        """
        parent = self.parent_run_id
        spec = result.spec
        if comparison is not None and (comparison.chapter, comparison.example, comparison.variant) != (
            spec.chapter, spec.example, spec.variant
        ):  # fmt: skip
            raise ValueError(
                f"comparison for {comparison.chapter}:{comparison.example}:{comparison.variant} passed with "
                f"result {spec.key}; pass the comparison whose optimized variant is this result"
            )
        ended = ended_ms if ended_ms is not None else int(time.time() * 1000)
        found = self._find(uid, parent) if resume else None
        if found is not None and found.info.status != "RUNNING":  # logged and ended by an earlier attempt
            self.record(result, comparison, found.info.run_id)
            return str(found.info.run_id)
        if found is not None:  # created by an earlier attempt that failed part-way: filled again, alike
            run = found
        else:
            tags = {**self._context_tags, PARENT_RUN_ID: parent, **self._uid_tag(uid)}
            started = ended - int(result.elapsed_s * 1000)
            run = self._client.create_run(self.experiment_id, start_time=started, run_name=spec.key, tags=tags)
        run_id = run.info.run_id
        host = result.host or self._host_manifest
        metrics = variant_metrics(result)
        tags = {**self._tags, **variant_tags(result), **host_tags(host)}
        if comparison is not None:
            baseline = self._run_ids.get(f"{comparison.chapter}:{comparison.example}:baseline")
            tags.update(comparison_tags(comparison, baseline))
            metrics.update(comparison_metrics(comparison))
        # A failure leaves the run open (RUNNING): ``resume`` finds and fills it. Files go up beside the batch.
        uploads = self._log_variant_artifacts(run, result, host, profile_dir, files)
        self._log(run_id, metrics=metrics, params=variant_params(result), tags=tags, ts=ended)
        for upload in uploads:
            upload.result()
        self._client.set_terminated(run_id, FAILED if result.status in FAILED_STATUSES else FINISHED, end_time=ended)
        self.record(result, comparison, run_id)
        return str(run_id)

    def record(self, result: VariantResult, comparison: Comparison | None, run_id: str) -> None:
        """A variant logged as ``run_id`` (here or by an earlier process): counted, and named as the baseline."""
        with self._lock:
            self._results.append(result)
            if comparison is not None:
                self._comparisons.append(comparison)
            self._run_ids[result.spec.key] = run_id

    def _log_variant_artifacts(
        self, run: Any, result: VariantResult, host: dict[str, Any], profile_dir: str | None, files: str | None
    ) -> list[Future[None]]:
        """result.json, manifest.json, the profile's files and the variant's own (files/), each on a thread."""
        repo, upload = artifact_repo(self._client, run.info.artifact_uri), self._uploads.submit
        uploads = [upload(self._upload_text, repo, n, t) for n, t in variant_files(result, host).items()]
        profile = profile_dir or (result.profile.dir if result.profile else None)
        for d, name in ((profile, "profile"), (files or result.files, "files")):
            if d is not None and Path(d).is_dir() and any(Path(d).iterdir()):
                uploads.append(upload(repo.log_artifacts, str(d), name))
        return uploads

    def _upload_text(self, repo: Any, name: str, text: str) -> None:
        with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
            (Path(tmp) / name).write_text(text)
            repo.log_artifact(str(Path(tmp) / name))

    def finish(self, summary_md: str, summary_json: dict[str, Any], failed: bool = False,
               ended_ms: int | None = None, interrupted: bool = False) -> None:  # fmt: skip
        """Attach the suite summary to the parent run and end it (when this tracker created it).

        ``failed`` means the suite itself did not complete (crash, abort); failing *variants* are not
        a suite failure, so a completed suite with failures still ends FINISHED. ``summary_json``
        values that JSON cannot encode (paths, datetimes) are written as strings. ``ended_ms``: when the
        suite ended (default now; a spooled suite uploaded later ends when it did). ``interrupted``: stopped by
        Ctrl-C or a signal; the parent ends KILLED, ``perflab.suite_status`` ``interrupted`` (or the summary's
        ``suite_status``: ``timeout``). The summary's ``stages_s`` and ``wall_s`` become metrics too.
        """
        parent = self.parent_run_id
        if self._finished:
            raise RuntimeError(f"Tracker.finish() already called for parent run {parent}")
        with self._lock:
            results = list(self._results)
            comparisons = list(self._comparisons)
        with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
            d = Path(tmp)
            (d / "summary.md").write_text(summary_md)
            (d / "summary.json").write_text(json.dumps(summary_json, indent=2, default=str))
            self._client.log_artifacts(parent, tmp)
        counts = suite_counts(results, comparisons)
        tags = suite_tags(
            results, counts, failed, "perflab.targets" not in self._tags, interrupted, summary_json.get("suite_status")
        )  # the caller's targets win; fmt: skip
        self._log(parent, metrics={**counts, **suite_time_metrics(summary_json)}, tags=tags, ts=ended_ms)
        if self._run_name is None and results:
            self._client.update_run(parent, name=suite_name(results, self._started))
        self._end(KILLED if interrupted else FAILED if failed else FINISHED, ended_ms)

    # --- parents whose children are not benchmark variants (sweep trials) -----------------------------

    def log_parent(
        self,
        metrics: Mapping[str, float | None] | None = None,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Params, finite metrics and tags on the parent run."""
        self._log(self.parent_run_id, metrics=finite(metrics), params=as_params(params), tags=tags)

    def log_child(
        self,
        run_name: str,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float | None] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """A finished nested run that is not a benchmark variant (e.g. a sweep trial); only finite metrics."""
        parent = self.parent_run_id
        run = self._client.create_run(
            self.experiment_id,
            run_name=run_name,
            tags={**self._context_tags, **(tags or {}), PARENT_RUN_ID: parent},
        )
        run_id = str(run.info.run_id)
        self._log(run_id, metrics=finite(metrics), params=as_params(params))
        self._client.set_terminated(run_id, FINISHED)
        return run_id

    def close(self, artifacts: Mapping[str, str] | None = None, failed: bool = False,
              interrupted: bool = False) -> None:  # fmt: skip
        """End a parent that is not a suite: attach text artifacts ``{file name: content}``, terminate it
        when this tracker created it (KILLED when ``interrupted``, FAILED when ``failed``)."""
        with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
            for name, content in (artifacts or {}).items():
                (Path(tmp) / name).write_text(content)
            if artifacts:
                self._client.log_artifacts(self.parent_run_id, tmp)
        self._end(KILLED if interrupted else FAILED if failed else FINISHED)

    def _end(self, status: str, ended_ms: int | None = None) -> None:
        if self._owns_parent and self._parent_run_id is not None:
            self._client.set_terminated(self._parent_run_id, status, end_time=ended_ms)
        self._finished = True  # once ended: a store that failed here may be tried again

    def __enter__(self) -> Tracker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._finished or self._parent_run_id is None:
            return
        if exc_type is None:
            self._end(FINISHED)  # left without finish(): completed, but no summary
            return
        status = KILLED if issubclass(exc_type, KeyboardInterrupt) else FAILED
        try:
            self._log(self._parent_run_id, tags={"perflab.suite_status": "crashed"})
        except Exception:  # the store may be why we crashed; never mask the original error
            _log.warning("could not tag parent run %s as crashed", self._parent_run_id, exc_info=True)
        self._end(status)

    def _log(
        self,
        run_id: str,
        metrics: Mapping[str, float] | None = None,
        params: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        ts: int | None = None,
    ) -> None:
        log_batch(self._client, run_id, metrics, params, {k: clip(v, MAX_TAG_LEN) for k, v in (tags or {}).items()}, ts)
