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
  ``manifest.json``. A variant that failed, timed out or was skipped logs what was measured and
  nothing else.
* Parents whose children are not variants (sweep trials, kernel providers): ``log_parent``, ``log_child``,
  ``close``.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.define.result import Comparison, VariantResult
from bench.record.contract import (
    FAILED_STATUSES,
    MAX_TAG_LEN,
    clip,
    comparison_metrics,
    comparison_tags,
    finite,
    suite_counts,
    variant_metrics,
    variant_params,
    variant_tags,
)
from bench.record.contract import params as as_params
from bench.record.store import PARENT_RUN_ID, client, experiment_name

__all__ = ["Tracker"]

_log = logging.getLogger(__name__)

# log_batch limits: 1000 entities in all, of which at most 100 params and 100 tags.
_BATCH_METRICS = 800
_BATCH_PARAMS_TAGS = 100
# Context tags copied from the parent to variant runs so the UI's source/user/commit columns fill.
_CONTEXT_TAG_PREFIXES = ("mlflow.source.", "mlflow.user", "mlflow.project.", "mlflow.gitRepoURL")
# MLflow's run statuses (mlflow.entities.RunStatus), as set_terminated takes them.
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"


def _context_tags(tags: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in tags.items() if k.startswith(_CONTEXT_TAG_PREFIXES)}


def _commit_tags(host_manifest: Mapping[str, Any]) -> dict[str, str]:
    """The suite's commit from the host manifest, as parent tags: MLflow's own git tag is missing on a
    host whose copy has no history (the manifest then has the commit from ``PERFLAB_GIT_COMMIT``)."""
    git = host_manifest.get("git") or {}
    tags = {"perflab.git_commit": git.get("commit"), "perflab.git_dirty": git.get("dirty")}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in tags.items() if v is not None}



def suite_name(results: list[VariantResult], started: float) -> str:
    """A suite's name for a person: its chapters (``ch07``; ``ch01, ch07``; ``20 chapters``), the device
    (the GPU's model, else ``cpu``) and the local start time."""
    chapters = sorted({r.spec.chapter for r in results})
    which = ", ".join(chapters) if len(chapters) <= 3 else f"{len(chapters)} chapters"
    gpus = sorted({str(g["name"]) for r in results if isinstance(g := r.manifest.get("gpu"), dict) and g.get("name")})
    devices = sorted({(r.device or "?").split(":")[0] for r in results if r.device})
    device = ", ".join(gpus) or ", ".join(devices) or "?"
    return f"{which} on {device}, {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}"


class Tracker:
    """Logs one suite invocation to MLflow: a parent run and a nested run per variant.

    Use as a context manager (``with Tracker(...) as t:``) so a crash marks the parent FAILED;
    call ``finish`` with the summary when the suite completed. ``log_variant`` may be called from
    several threads (the scheduler runs one queue per GPU); the counters it keeps are locked.
    """

    def __init__(
        self,
        experiment: str | None = None,
        tracking_uri: str | None = None,
        run_name: str | None = None,
        host_manifest: dict[str, Any] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        """``tracking_uri=None`` lets MLflow decide (``MLFLOW_TRACKING_URI``, else ./mlflow.db).

        ``experiment=None`` uses ``MLFLOW_EXPERIMENT_NAME`` when set, else "perflab"; it is ignored
        when a parent run is adopted from ``MLFLOW_RUN_ID`` (that run's experiment wins).
        ``tags`` go on the parent and on every variant run, so variant searches can filter on them.
        """
        self._client = client(tracking_uri)
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
    def tracking_uri(self) -> str:
        return self._client.tracking_uri

    @property
    def experiment_name(self) -> str:
        """The experiment the parent run is in (an adopted run's, not the one asked for)."""
        return str(self._client.get_experiment(self.experiment_id).name)

    def run_id(self, key: str) -> str | None:
        """Run id of a variant logged by this tracker, by ``chapter:example:variant``."""
        return self._run_ids.get(key)

    def start(self) -> str:
        """Open (or adopt) the parent run and return its id; calling it again returns the same id."""
        if self._parent_run_id is not None:
            return self._parent_run_id
        import os

        from mlflow.tracking.context.registry import resolve_tags

        adopted = os.environ.get("MLFLOW_RUN_ID")
        if adopted:
            # Inside `mlflow run`: the project run is ours to fill, not to create or terminate.
            run = self._client.get_run(adopted)
            self._experiment_id = run.info.experiment_id
            self._parent_run_id = run.info.run_id
            self._owns_parent = False
            self._context_tags = _context_tags(run.data.tags)
            tags = {**self._tags, **_commit_tags(self._host_manifest)}
            if tags:
                self._log(self._parent_run_id, tags=tags)
            if self._run_name is None:  # MLflow's random name until finish() names it for its results
                self._client.update_run(self._parent_run_id, name=self._provisional_name())
        else:
            self._experiment_id = self._get_or_create_experiment(self._experiment_name)
            context = resolve_tags()  # user, source file, git commit: what fluent runs get for free
            self._context_tags = _context_tags(context)
            tags = {**context, **self._tags, **_commit_tags(self._host_manifest)}
            name = self._run_name or self._provisional_name()
            run = self._client.create_run(self._experiment_id, run_name=name, tags=tags)
            self._parent_run_id = run.info.run_id
            self._owns_parent = True
        return self._parent_run_id

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

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str:
        """Log one variant as a nested run and return its id.

        ``comparison`` is the pair this (optimized) variant belongs to; it adds ``speedup``,
        ``max_rel_error`` and the verification tags. The variant run ends FAILED when the variant
        failed, timed out or was invalid (so the MLflow UI flags it), FINISHED otherwise; the
        precise outcome is always in the ``perflab.status`` tag.
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
        run = self._client.create_run(
            self.experiment_id, run_name=spec.key, tags={**self._context_tags, PARENT_RUN_ID: parent}
        )
        run_id = run.info.run_id
        try:
            metrics = variant_metrics(result)
            tags = {**self._tags, **variant_tags(result)}
            if comparison is not None:
                baseline = self._run_ids.get(f"{comparison.chapter}:{comparison.example}:baseline")
                tags.update(comparison_tags(comparison, baseline))
                metrics.update(comparison_metrics(comparison))
            self._log(run_id, metrics=metrics, params=variant_params(result), tags=tags)
            self._log_variant_artifacts(run_id, result)
        except BaseException:
            self._client.set_terminated(run_id, FAILED)
            raise
        self._client.set_terminated(run_id, FAILED if result.status in FAILED_STATUSES else FINISHED)
        with self._lock:
            self._results.append(result)
            if comparison is not None:
                self._comparisons.append(comparison)
            self._run_ids[spec.key] = run_id
        return run_id

    def _log_variant_artifacts(self, run_id: str, result: VariantResult) -> None:
        with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
            d = Path(tmp)
            (d / "result.json").write_text(result.model_dump_json(indent=2))
            manifest = {
                "host": self._host_manifest,
                "device": result.manifest,
                # Seeds and every other setting the variant actually ran with (all layers applied).
                "seeds": {"random/numpy/torch/cuda": result.config.get("seed")},
                "config": result.config,
            }
            (d / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
            self._client.log_artifacts(run_id, tmp)  # one upload for both files
        profile = Path(result.profile.dir) if result.profile and result.profile.dir else None
        if profile is not None and profile.is_dir() and any(profile.iterdir()):
            self._client.log_artifacts(run_id, str(profile), artifact_path="profile")

    def finish(self, summary_md: str, summary_json: dict[str, Any], failed: bool = False) -> None:
        """Attach the suite summary to the parent run and end it (when this tracker created it).

        ``failed`` means the suite itself did not complete (crash, abort); failing *variants* are not
        a suite failure, so a completed suite with failures still ends FINISHED. ``summary_json``
        values that JSON cannot encode (paths, datetimes) are written as strings.
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
        tags = {
            "perflab.n_variants": str(int(counts["n_variants"])),
            "perflab.n_failed": str(int(counts["n_failed"])),
            "perflab.suite_status": "failed" if failed else "completed",
        }
        if "perflab.targets" not in self._tags:  # a caller's own (requested) targets win
            targets = sorted({r.spec.target for r in results})
            tags["perflab.targets"] = clip(",".join(targets), MAX_TAG_LEN)
        self._log(parent, metrics=counts, tags=tags)
        if self._run_name is None and results:
            self._client.update_run(parent, name=suite_name(results, self._started))
        self._end(FAILED if failed else FINISHED)

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

    def close(self, artifacts: Mapping[str, str] | None = None, failed: bool = False) -> None:
        """End a parent that is not a suite: attach text artifacts ``{file name: content}``, terminate it
        when this tracker created it (FAILED when ``failed``)."""
        with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
            for name, content in (artifacts or {}).items():
                (Path(tmp) / name).write_text(content)
            if artifacts:
                self._client.log_artifacts(self.parent_run_id, tmp)
        self._end(FAILED if failed else FINISHED)

    def _end(self, status: str) -> None:
        self._finished = True
        if self._owns_parent and self._parent_run_id is not None:
            self._client.set_terminated(self._parent_run_id, status)

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
    ) -> None:
        """One log_batch per run when it fits; chunked to the store's per-call limits otherwise."""
        ts = int(time.time() * 1000)
        from mlflow.entities import Metric, Param, RunTag

        ms = [Metric(k, v, ts, 0) for k, v in (metrics or {}).items()]
        ps = [Param(k, v) for k, v in (params or {}).items()]
        rts = [RunTag(k, clip(v, MAX_TAG_LEN)) for k, v in (tags or {}).items()]
        calls = max(1, -(-len(ms) // _BATCH_METRICS), -(-max(len(ps), len(rts)) // _BATCH_PARAMS_TAGS))
        for i in range(calls):
            m = slice(i * _BATCH_METRICS, (i + 1) * _BATCH_METRICS)
            b = slice(i * _BATCH_PARAMS_TAGS, (i + 1) * _BATCH_PARAMS_TAGS)
            self._client.log_batch(run_id, metrics=ms[m], params=ps[b], tags=rts[b])


