"""MLflow tracking: one parent run per suite invocation, one nested run per variant.

This is the only module that imports mlflow. Only the parent process imports it: mlflow's import is
slow and its store must be opened once, not in every child. It uses ``MlflowClient`` with explicit
run ids rather than the fluent ``mlflow.start_run`` API, because the fluent API keeps a global
active-run stack that a scheduler logging several variants (possibly from several threads) would
have to juggle, and because ``log_batch`` writes a variant's metrics, params and tags in one call.

What goes where (and what readers of the store may rely on):

* Parent run — the suite. Adopted from ``MLFLOW_RUN_ID`` when set (inside ``mlflow run``, which
  owns and terminates that run); otherwise created here and terminated by ``finish``: FINISHED when
  the suite completed, *even if variants failed* (their failures are data, recorded per variant),
  FAILED/KILLED only when the suite itself crashed or was interrupted.
* Variant run — nested (``mlflow.parentRunId``), named ``chapter:example:variant``; tags
  ``perflab.*``, metrics ``time_*_ms`` / ``mem_*_mb`` / derived throughput / ``stage_<name>_s``,
  params = the effective config, artifacts ``result.json`` (full result, raw samples) and
  ``manifest.json``. A variant that failed, timed out or was skipped logs what was measured and
  nothing else: no metric is ever invented (no zeros, no NaNs standing in for a missing time).
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from unittest import mock

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking.context.registry import resolve_tags
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from bench.record.peaks import binding_ceiling, hardware_key, peak_metrics
from bench.record.result import Comparison, VariantResult

__all__ = ["DEFAULT_EXPERIMENT", "StoredRun", "Tracker"]

_log = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "perflab"
# Statuses that mean the variant did not produce a trustworthy number (``skipped`` is deliberate).
_FAILED_STATUSES = frozenset({"failed", "timeout", "invalid"})
# Store limits (mlflow.utils.validation): longer values are rejected, not truncated, by the store.
_MAX_PARAM_LEN = 6000
_MAX_TAG_LEN = 8000
_MAX_DETAIL_LEN = 5000  # verification / error text kept in tags; the full text is in result.json
# log_batch limits: 1000 entities in all, of which at most 100 params and 100 tags.
_BATCH_METRICS = 800
_BATCH_PARAMS_TAGS = 100
# Characters MLflow accepts in metric/param names on every OS (colon is refused on Windows).
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ")
# Context tags copied from the parent to variant runs so the UI's source/user/commit columns fill.
_CONTEXT_TAG_PREFIXES = ("mlflow.source.", "mlflow.user", "mlflow.project.", "mlflow.gitRepoURL")


def _name(key: str) -> str:
    """A metric/param name MLflow accepts everywhere (e.g. a percentile label from a config)."""
    return "".join(c if c in _NAME_OK else "_" for c in key)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _param_value(value: Any) -> str:
    """Params are strings; lists read better comma-joined ("25.0,50.0") than as a Python repr."""
    if isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = json.dumps(value, sort_keys=True, default=str)
    else:
        text = str(value)
    return _clip(text, _MAX_PARAM_LEN)


def _context_tags(tags: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in tags.items() if k.startswith(_CONTEXT_TAG_PREFIXES)}


def _commit_tags(host_manifest: Mapping[str, Any]) -> dict[str, str]:
    """The suite's commit from the host manifest, as parent tags: MLflow's own git tag is missing on a
    host whose copy has no history (the manifest then has the commit from ``PERFLAB_GIT_COMMIT``)."""
    git = host_manifest.get("git") or {}
    tags = {"perflab.git_commit": git.get("commit"), "perflab.git_dirty": git.get("dirty")}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in tags.items() if v is not None}


def variant_metrics(result: VariantResult) -> dict[str, float]:
    """Every number the result actually holds, under MLflow-legal names; nothing filled in.

    Non-finite values are dropped rather than logged: a NaN in the store reads as a measurement.
    """
    out: dict[str, float] = {}
    if result.timing is not None:
        st = result.timing.stats
        out.update(
            time_mean_ms=st.mean_ms,
            time_median_ms=st.median_ms,
            time_std_ms=st.std_ms,
            time_min_ms=st.min_ms,
            time_max_ms=st.max_ms,
            time_iqr_ms=st.iqr_ms,
            time_cv=st.cv,
            n_samples=float(st.n),
        )
        for label, value in st.percentiles_ms.items():  # "p50", "p99_9" → time_p50_ms, time_p99_9_ms
            out[_name(f"time_{label}_ms")] = value
        if result.timing.first_call_ms is not None:
            out["time_first_call_ms"] = result.timing.first_call_ms
        out["warmup_calls"] = float(result.timing.warmup_calls)
        if result.timing.noise is not None:
            out["timing_noise_pct"] = 100.0 * result.timing.noise
        if result.timing.target_met is not None:
            out["timing_target_met"] = float(result.timing.target_met)
        sm = result.timing.machine_after.get("sm_clock_mhz")
        if sm is not None:
            out["gpu_sm_clock_after_mhz"] = float(sm)
    if result.batch is not None:  # back-to-back calls, warm L2 (bench.measure.clocks: the batch kind)
        bt = result.batch.stats
        out.update(
            batch_time_median_ms=bt.median_ms,
            batch_time_min_ms=bt.min_ms,
            batch_time_iqr_ms=bt.iqr_ms,
            batch_calls=float(result.batch.calls),
            batch_n_samples=float(bt.n),
        )
        for label in ("p90", "p99"):
            if label in bt.percentiles_ms:
                out[f"batch_time_{label}_ms"] = bt.percentiles_ms[label]
    if result.recheck is not None and result.recheck.restored_ms is not None:
        out["recheck_restored_ms"] = result.recheck.restored_ms
    if result.memory is not None:
        mem = result.memory
        out["mem_peak_mb"] = mem.peak_mb
        for key, value in (
            ("mem_allocated_mb", mem.allocated_mb),
            ("mem_reserved_mb", mem.reserved_mb),
            ("mem_rss_peak_mb", mem.rss_peak_mb),
            ("mem_harness_mb", mem.harness_mb),
        ):
            if value is not None:
                out[key] = value
    out.update({_name(k): v for k, v in result.derived_metrics().items()})
    if result.generation is not None:  # token generation: ttft_*/tpot_* (median, p90, p99), tokens/s, requests/s
        out.update(result.generation.metrics())
    if result.profile is not None:  # prof_* / ncu_* from the separate profile child(ren)
        out.update({_name(k): v for k, v in result.profile.metrics.items()})
    out.update(peak_metrics(result))  # percent of the device's cached ceiling (`perflab peak`), if any
    for stage in result.stages:
        if stage.duration_s is not None:
            out[_name(f"stage_{stage.name}_s")] = stage.duration_s
    if result.elapsed_s > 0:  # 0.0 is the model's default for "never started", not a measurement
        out["elapsed_s"] = result.elapsed_s
    # How the child got going: its CUDA context, its start ahead (runner.Gate).
    out["cuda_start_s"] = result.cuda_start_s
    out["ahead_s"] = result.ahead_s
    out["gate_late_s"] = result.gate_late_s
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def _recheck_summary(r: Any) -> str:
    parts = []
    if r.mutated:
        same = {True: "same output", False: "a different output", None: "output not compared"}[r.restored_same_output]
        parts.append(f"timed calls changed {', '.join(r.mutated[:4])}; a call from the set-up state: {same}")
    if r.perturbed == 0:
        parts.append("no floating tensor to change")
    elif r.perturbed is not None:
        followed = "followed" if r.output_changed else "did not change"
        parts.append(f"{r.perturbed} set-up tensor(s) changed: output {followed}")
    return "; ".join(parts) or "nothing to report"


def variant_params(result: VariantResult) -> dict[str, str]:
    """The effective config, plus ``device`` = the device actually used.

    The config's own ``device`` is often "auto"; the resolved one ("cuda:0") is what a reader
    filters on, so it takes the key and the requested value moves to ``device_requested``.
    """
    params = {_name(k): _param_value(v) for k, v in result.config.items()}
    params.update({_name(f"size.{k}"): _param_value(v) for k, v in result.sizes.items()})  # context().working_set
    requested = params.get("device")
    if result.device is not None:
        params["device"] = result.device
        if requested is not None and requested != result.device:
            params["device_requested"] = requested
    return params


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
        self._client = MlflowClient(tracking_uri=tracking_uri)
        self._experiment_name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
        self._run_name = run_name
        self._host_manifest = host_manifest or {}
        self._tags = {k: str(v) for k, v in (tags or {}).items()}
        self._parent_run_id: str | None = None
        self._experiment_id: str | None = None
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

    def run_id(self, key: str) -> str | None:
        """Run id of a variant logged by this tracker, by ``chapter:example:variant``."""
        return self._run_ids.get(key)

    def start(self) -> str:
        """Open (or adopt) the parent run and return its id; calling it again returns the same id."""
        if self._parent_run_id is not None:
            return self._parent_run_id
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
        else:
            self._experiment_id = self._get_or_create_experiment(self._experiment_name)
            context = resolve_tags()  # user, source file, git commit: what fluent runs get for free
            self._context_tags = _context_tags(context)
            tags = {**context, **self._tags, **_commit_tags(self._host_manifest)}
            run = self._client.create_run(self._experiment_id, run_name=self._run_name, tags=tags)
            self._parent_run_id = run.info.run_id
            self._owns_parent = True
        return self._parent_run_id

    def _get_or_create_experiment(self, name: str) -> str:
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
            spec.chapter,
            spec.example,
            spec.variant,
        ):
            raise ValueError(
                f"comparison for {comparison.chapter}:{comparison.example}:{comparison.variant} passed with "
                f"result {spec.key}; pass the comparison whose optimized variant is this result"
            )
        run = self._client.create_run(
            self.experiment_id, run_name=spec.key, tags={**self._context_tags, MLFLOW_PARENT_RUN_ID: parent}
        )
        run_id = run.info.run_id
        try:
            metrics = variant_metrics(result)
            tags = {**self._tags, **self._variant_tags(result)}
            if comparison is not None:
                tags.update(self._comparison_tags(comparison))
                for name in ("speedup", "speedup_ci_low", "speedup_ci_high"):
                    value = getattr(comparison, name)
                    if value is not None and math.isfinite(value):
                        metrics[name] = float(value)
                rel = comparison.verification.max_rel_error
                if rel is not None and math.isfinite(rel):
                    metrics["max_rel_error"] = float(rel)
            self._log(run_id, metrics=metrics, params=variant_params(result), tags=tags)
            self._log_variant_artifacts(run_id, result)
        except BaseException:
            self._client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
            raise
        status = RunStatus.FAILED if result.status in _FAILED_STATUSES else RunStatus.FINISHED
        self._client.set_terminated(run_id, RunStatus.to_string(status))
        with self._lock:
            self._results.append(result)
            if comparison is not None:
                self._comparisons.append(comparison)
            self._run_ids[spec.key] = run_id
        return run_id

    def _variant_tags(self, result: VariantResult) -> dict[str, str]:
        spec = result.spec
        device = result.device or result.config.get("device")
        mode = result.timing.mode if result.timing else result.config.get("timing_mode")
        gpu = result.manifest.get("gpu")
        tags = {
            "perflab.chapter": spec.chapter,
            "perflab.example": spec.example,
            "perflab.variant": spec.variant,
            "perflab.target": spec.target,
            "perflab.status": result.status,
        }
        optional = {
            "perflab.failed_stage": result.failed_stage,
            "perflab.device": device,
            "perflab.timing_mode": mode,
            "perflab.gpu": gpu.get("name") if isinstance(gpu, Mapping) else None,
            "perflab.hardware": hardware_key(result),  # the peak cache / expectations key
            "perflab.peak_ceiling": ceiling[1] if (ceiling := binding_ceiling(result)) else None,  # pct_of_peak's
            # Software versions beside the hardware key: regression history is searched on all three.
            "perflab.torch": result.manifest.get("torch"),
            "perflab.triton": result.manifest.get("triton"),
            "perflab.limit_s": result.limit_s,
            "perflab.launch": result.launch,
            # Which physical GPU "cuda:0" was (the worker's CUDA_VISIBLE_DEVICES under --gpus).
            "perflab.cuda_visible_devices": result.cuda_visible_devices,
            "perflab.error_kind": result.error.kind if result.error else None,
            "perflab.error": _clip(result.error.message, _MAX_DETAIL_LEN) if result.error else None,
            "perflab.validation": _clip(result.validation, _MAX_DETAIL_LEN) if result.validation else None,
            "perflab.skip_reason": _clip(result.skip_reason, _MAX_DETAIL_LEN) if result.skip_reason else None,
            "perflab.arrival": result.generation.arrival if result.generation else None,  # token generation
        }
        t = result.timing
        if t is not None:
            if t.notes:
                optional["perflab.timing_notes"] = _clip("; ".join(t.notes), _MAX_DETAIL_LEN)
            optional["perflab.timing_fallback"] = t.fallback
            optional["perflab.timing_stop"] = t.stop_reason
            # The tag describes the primary time_* (cold: one call per sample); batch_time_* is always warm.
            optional["perflab.l2"] = "flushed" if t.l2_flushed else "warm"
            steady = {True: "steady", False: "unsteady"}
            optional["perflab.warmup"] = steady.get(t.warmup_stable)
            drift = next((n for n in t.notes if n.startswith("drift:")), None)
            optional["perflab.drift"] = _clip(drift, _MAX_DETAIL_LEN) if drift else None
            if t.machine_flags:
                optional["perflab.machine_flags"] = _clip("; ".join(t.machine_flags), _MAX_DETAIL_LEN)
        if result.batch is not None:
            optional["perflab.batch"] = _clip(result.batch.method, _MAX_DETAIL_LEN)
        if result.tampered:
            optional["perflab.tampered"] = _clip(", ".join(result.tampered), _MAX_DETAIL_LEN)
        r = result.recheck
        if r is not None:
            optional["perflab.recheck"] = _clip(_recheck_summary(r), _MAX_DETAIL_LEN)
        p = result.profile
        if p is not None:
            optional["perflab.bound"] = p.bound
            optional["perflab.bound_evidence"] = p.bound_evidence and _clip(p.bound_evidence, _MAX_DETAIL_LEN)
            optional.update({f"perflab.profile_{t}": _clip(state, _MAX_DETAIL_LEN) for t, state in p.tools.items()})
        tags.update({k: str(v) for k, v in optional.items() if v is not None})
        return tags

    def _comparison_tags(self, comparison: Comparison) -> dict[str, str]:
        v = comparison.verification
        tags = {
            "perflab.pair_status": comparison.status,
            "perflab.verified": "true" if v.verified else "false",
            "perflab.verification": _clip(v.detail, _MAX_DETAIL_LEN),
            "perflab.speedup_time": comparison.speedup_time,
            # time, or a generation pair's ttft/tpot/throughput
            "perflab.speedup_metric": comparison.speedup_metric,
        }
        if comparison.significance is not None:
            tags["perflab.significance"] = comparison.significance
        baseline = self._run_ids.get(f"{comparison.chapter}:{comparison.example}:baseline")
        if baseline is not None:
            tags["perflab.baseline_run_id"] = baseline
        if comparison.across_gpus is not None:  # baseline and optimized on two GPUs of one model
            tags["perflab.across_gpus"] = comparison.across_gpus
        return tags

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
        counts = _suite_counts(results, comparisons)
        tags = {
            "perflab.n_variants": str(int(counts["n_variants"])),
            "perflab.n_failed": str(int(counts["n_failed"])),
            "perflab.suite_status": "failed" if failed else "completed",
        }
        if "perflab.targets" not in self._tags:  # a caller's own (requested) targets win
            targets = sorted({r.spec.target for r in results})
            tags["perflab.targets"] = _clip(",".join(targets), _MAX_TAG_LEN)
        self._log(parent, metrics=counts, tags=tags)
        self._end(RunStatus.FAILED if failed else RunStatus.FINISHED)

    # --- parents whose children are not benchmark variants (sweep trials) -----------------------------

    def log_parent(
        self,
        metrics: Mapping[str, float | None] | None = None,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Params, finite metrics and tags on the parent run."""
        self._log(self.parent_run_id, metrics=_finite(metrics), params=_params(params), tags=tags)

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
            tags={**self._context_tags, **(tags or {}), MLFLOW_PARENT_RUN_ID: parent},
        )
        run_id = str(run.info.run_id)
        self._log(run_id, metrics=_finite(metrics), params=_params(params))
        self._client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
        return run_id

    def close(self, artifacts: Mapping[str, str] | None = None, failed: bool = False) -> None:
        """End a parent that is not a suite: attach text artifacts ``{file name: content}``, terminate it
        when this tracker created it (FAILED when ``failed``)."""
        with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
            for name, content in (artifacts or {}).items():
                (Path(tmp) / name).write_text(content)
            if artifacts:
                self._client.log_artifacts(self.parent_run_id, tmp)
        self._end(RunStatus.FAILED if failed else RunStatus.FINISHED)

    def _end(self, status: int) -> None:
        self._finished = True
        if self._owns_parent and self._parent_run_id is not None:
            self._client.set_terminated(self._parent_run_id, RunStatus.to_string(status))

    def __enter__(self) -> Tracker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._finished or self._parent_run_id is None:
            return
        if exc_type is None:
            self._end(RunStatus.FINISHED)  # left without finish(): completed, but no summary
            return
        status = RunStatus.KILLED if issubclass(exc_type, KeyboardInterrupt) else RunStatus.FAILED
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
        ms = [Metric(k, v, ts, 0) for k, v in (metrics or {}).items()]
        ps = [Param(k, v) for k, v in (params or {}).items()]
        rts = [RunTag(k, _clip(v, _MAX_TAG_LEN)) for k, v in (tags or {}).items()]
        calls = max(1, -(-len(ms) // _BATCH_METRICS), -(-max(len(ps), len(rts)) // _BATCH_PARAMS_TAGS))
        for i in range(calls):
            m = slice(i * _BATCH_METRICS, (i + 1) * _BATCH_METRICS)
            b = slice(i * _BATCH_PARAMS_TAGS, (i + 1) * _BATCH_PARAMS_TAGS)
            self._client.log_batch(run_id, metrics=ms[m], params=ps[b], tags=rts[b])


def _finite(metrics: Mapping[str, float | None] | None) -> dict[str, float]:
    return {_name(k): float(v) for k, v in (metrics or {}).items() if v is not None and math.isfinite(v)}


def _params(params: Mapping[str, Any] | None) -> dict[str, str]:
    return {_name(k): _param_value(v) for k, v in (params or {}).items()}


def _suite_counts(results: list[VariantResult], comparisons: list[Comparison]) -> dict[str, float]:
    """Parent-run metrics: outcome counts, and the geometric-mean speedup of verified pairs."""
    counts: dict[str, float] = {
        "n_variants": float(len(results)),
        "n_ok": float(sum(r.status == "ok" for r in results)),
        "n_failed": float(sum(r.status in _FAILED_STATUSES for r in results)),
        "n_skipped": float(sum(r.status == "skipped" for r in results)),
        "n_pairs": float(len(comparisons)),
        "n_pairs_ok": float(sum(c.status == "ok" for c in comparisons)),
        "n_verified": float(sum(c.verification.verified for c in comparisons)),
    }
    # Geometric mean: speedups are ratios, so 2x and 0.5x must cancel to 1x, not average to 1.25x.
    good = [c.speedup for c in comparisons if c.status == "ok" and c.speedup and c.speedup > 0]
    if good:
        counts["speedup_geomean"] = math.exp(sum(math.log(s) for s in good) / len(good))
    return counts


def suite_runs(parent_run_id: str | None = None, tracking_uri: str | None = None) -> tuple[str, list[Any]]:
    """The variant runs of one suite (the latest completed suite when ``parent_run_id`` is None).

    Returns ``(parent_run_id, runs)`` with runs sorted by name; what ``perflab show`` tabulates.
    """
    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if parent_run_id is None:
        parent_run_id = latest_suite_run_id(tracking_uri)
    runs = client.search_runs(experiments, filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'")
    return parent_run_id, sorted(runs, key=lambda r: r.info.run_name or "")


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
    client = MlflowClient(tracking_uri=tracking_uri)
    name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found else client.create_experiment(name)
    run = client.create_run(experiment_id, run_name=run_name, tags=dict(tags or {}))
    run_id = run.info.run_id
    client.log_batch(
        run_id,
        metrics=[
            Metric(_name(k), float(v), int(time.time() * 1000), 0) for k, v in metrics.items() if math.isfinite(v)
        ],
        params=[Param(_name(k), _param_value(v)) for k, v in params.items()],
    )
    with tempfile.TemporaryDirectory() as tmp:
        for fname, content in artifacts.items():
            path = Path(tmp) / fname
            path.write_text(content)
            client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run_id


# ------------------------------------------------------------------------------ reading the store back
# analysis/ reads runs through these helpers and sees plain data, never mlflow's own types.


@dataclass(frozen=True)
class StoredRun:
    """One run as read back from the store."""

    run_id: str
    name: str
    experiment_id: str
    status: str  # MLflow's run status: FINISHED, FAILED, KILLED, RUNNING
    start_time: int  # ms since the epoch
    tags: dict[str, str]
    metrics: dict[str, float]

    @property
    def parent_id(self) -> str | None:
        return self.tags.get(MLFLOW_PARENT_RUN_ID)

    @property
    def is_variant(self) -> bool:
        """A variant run (nested, one benchmark file) rather than a suite's parent run."""
        return "perflab.variant" in self.tags


def _stored(run: Any) -> StoredRun:
    return StoredRun(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        experiment_id=run.info.experiment_id,
        status=run.info.status,
        start_time=int(run.info.start_time or 0),
        tags=dict(run.data.tags),
        metrics=dict(run.data.metrics),
    )


def _quoted(value: str) -> str:
    """A value for an MLflow filter string; the filter grammar has no escape for quotes."""
    if "'" in value:
        raise ValueError(f"cannot search MLflow for a value containing a quote: {value!r}")
    return f"'{value}'"


def latest_suite_run_id(tracking_uri: str | None = None) -> str:
    """Id of the most recently started suite that completed."""
    client = MlflowClient(tracking_uri=tracking_uri)
    latest = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string="tags.`perflab.suite_status` = 'completed'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not latest:
        raise LookupError(f"no completed perflab suite in the store {client.tracking_uri!r}")
    return str(latest[0].info.run_id)


def read_run(run_id: str, tracking_uri: str | None = None) -> StoredRun:
    """One run by id; ``LookupError`` naming the id and the store when it does not exist."""
    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        return _stored(client.get_run(run_id))
    except MlflowException as exc:
        raise LookupError(f"no MLflow run {run_id!r} in the store {client.tracking_uri!r}") from exc


def child_runs(parent_run_id: str, tracking_uri: str | None = None) -> list[StoredRun]:
    """The nested runs of a parent run, sorted by name."""
    _, runs = suite_runs(parent_run_id, tracking_uri)
    return [_stored(r) for r in runs]


def benchmark_runs(
    experiment_id: str, chapter: str, example: str, variant: str, tracking_uri: str | None = None
) -> list[StoredRun]:
    """Every run of one benchmark variant in an experiment, newest first, whatever its status."""
    client = MlflowClient(tracking_uri=tracking_uri)
    keys = {"chapter": chapter, "example": example, "variant": variant}
    where = " and ".join(f"tags.`perflab.{k}` = {_quoted(v)}" for k, v in keys.items())
    # search_runs returns at most 1000 runs: far more history than a regression check pools.
    runs = client.search_runs([experiment_id], filter_string=where, order_by=["attributes.start_time DESC"])
    return [_stored(r) for r in runs]


def tagged_runs(tags: Mapping[str, str], tracking_uri: str | None = None, max_results: int = 100) -> list[StoredRun]:
    """Runs of any experiment that carry every tag in ``tags`` (e.g. the peak runs of one hardware key),
    newest first."""
    client = MlflowClient(tracking_uri=tracking_uri)
    where = " and ".join(f"tags.`{k}` = {_quoted(v)}" for k, v in tags.items())
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string=where,
        order_by=["attributes.start_time DESC"],
        max_results=max_results,
    )
    return [_stored(r) for r in runs]


def read_artifact_text(run_id: str, path: str, tracking_uri: str | None = None) -> str:
    """A text artifact of a run (``result.json``, ``manifest.json``); ``LookupError`` when missing."""
    client = MlflowClient(tracking_uri=tracking_uri)
    # MLflow draws a progress bar per download on stderr: noise for a command reading dozens of files.
    quiet = {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    with tempfile.TemporaryDirectory(prefix="perflab-") as tmp, mock.patch.dict(os.environ, quiet):
        try:
            local = client.download_artifacts(run_id, path, tmp)
        except (MlflowException, OSError) as exc:
            raise LookupError(f"run {run_id!r} has no artifact {path!r} in the store {client.tracking_uri!r}") from exc
        return Path(local).read_text()


def log_text_artifacts(run_id: str, files: Mapping[str, str | bytes], tracking_uri: str | None = None) -> None:
    """Attach files ``{name: text or bytes}`` to an existing run (a report and its PNGs on the parent)."""
    client = MlflowClient(tracking_uri=tracking_uri)
    with tempfile.TemporaryDirectory(prefix="perflab-") as tmp:
        for name, content in files.items():
            path = Path(tmp) / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        client.log_artifacts(run_id, tmp)
