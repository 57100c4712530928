"""MLflow for ``perflab kernels``: a parent run per case, a nested run per dtype and provider.

A thin layer over ``bench.record.Tracker`` (the only module that talks to MLflow), like
sweeps/tracking.py. Under ``mlflow run -e kernels`` the project's run (``MLFLOW_RUN_ID``) is adopted as
every case's parent, so nothing logged on a parent may differ between cases: its params are the
invocation's (identical for all cases) or carry the case name, and so do its metrics and artifacts.

* Parent ``perflab kernels <case>`` (tag ``perflab.kind=kernels``): params (cases, dtypes, providers,
  device, timing settings, the hardware key and its cached copy bandwidth ``copy_gbps``, ``<case>.shapes``,
  ``<case>.check_shapes``); metrics ``<case>.<dtype>.<direction>.speedup_vs_<naive|compiled>_geomean``
  (triton's, over the sweep); for the bandwidth target's cases (rms, add_rms) the tag
  ``perflab.target.<case>.<dtype>.fwd_pct_of_copy`` = met | not met | not measured and, when measured,
  the metric ``<case>.<dtype>.fwd.min_pct_of_copy_at_64mb`` (triton's lowest % of the copy bandwidth at
  ≥ 64 MB of activations); artifacts: the CSVs, the speedup PNGs, a ``<case>-skipped.txt`` naming what
  was not timed and why, a ``<case>-targets.txt`` with the target's summary lines.
* Child ``kernels:<case>:<dtype>:<provider>`` (tags ``perflab.kind=kernels-provider``, ``perflab.case``,
  ``perflab.dtype``, ``perflab.provider``, ``perflab.status`` = ok | partial | skipped, ``perflab.reason``):
  metrics ``<direction>.<shape>_us`` (median µs), ``<direction>.<shape>_gbps`` (the case's minimum bytes
  per call over it), ``<direction>.<shape>.pct_of_copy`` (of the cached copy bandwidth; absent when none
  is cached), ``<direction>.speedup_vs_<naive|compiled>_geomean`` of this provider,
  ``<direction>.<shape>.kernels_per_call`` with ``--profile``. Only measured numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from bench.record import Tracker, host_manifest, log_text_artifacts
from kernels.sweep import Row, bandwidth_target, geomean

__all__ = ["KernelsTracker"]

_AGAINST = ("naive", "compiled")


class KernelsTracker:
    """One case's parent run. Use as a context manager: a crash leaves the parent FAILED."""

    def __init__(self, case: str, params: Mapping[str, Any], experiment: str | None = None,
                 tracking_uri: str | None = None) -> None:  # fmt: skip
        self.case = case
        self._tracker = Tracker(experiment=experiment, tracking_uri=tracking_uri, run_name=f"perflab kernels {case}",
                                host_manifest=host_manifest(), tags={"perflab.kind": "kernels"})  # fmt: skip
        self.parent = self._tracker.start()
        self._tracker.log_parent(params=params)
        self._files: dict[str, str | bytes] = {}
        self._skipped: list[str] = []
        self._targets: list[str] = []

    def log_dtype(self, dtype_name: str, rows: Mapping[str, Sequence[Row]], providers: Sequence[str],
                  files: Mapping[str, str | bytes]) -> dict[str, float]:  # fmt: skip
        """A child run per provider; triton's geomean speedups and the bandwidth target on the parent (the
        metrics returned); ``files`` (the CSVs and plots) are attached when the case finishes."""
        for p in providers:
            self._log_provider(dtype_name, p, rows)
        metrics: dict[str, float] = {}
        for direction, rs in rows.items():
            for against in _AGAINST:
                gm = geomean(r.speedup(against) for r in rs)
                if gm is not None:
                    metrics[f"{self.case}.{dtype_name}.{direction}.speedup_vs_{against}_geomean"] = gm
        tags: dict[str, str] = {}
        target = bandwidth_target(self.case, dtype_name, rows.get("fwd", []))
        if target is not None:
            tags[f"perflab.target.{self.case}.{dtype_name}.fwd_pct_of_copy"] = target.verdict
            if target.min_pct is not None:
                metrics[f"{self.case}.{dtype_name}.fwd.min_pct_of_copy_at_64mb"] = target.min_pct
            self._targets.append(target.line)
        self._tracker.log_parent(metrics=metrics, tags=tags)
        self._files.update(files)
        return metrics

    def _log_provider(self, dtype_name: str, provider: str, rows: Mapping[str, Sequence[Row]]) -> str:
        metrics: dict[str, float | None] = {}
        reasons: dict[str, None] = {}  # ordered, unique
        for direction, rs in rows.items():
            for r in rs:
                if provider in r.us:
                    metrics[f"{direction}.{r.shape}_us"] = r.us[provider]
                    metrics[f"{direction}.{r.shape}_gbps"] = r.gbps(provider)
                    metrics[f"{direction}.{r.shape}.pct_of_copy"] = r.pct_of_copy(provider)
                    metrics[f"{direction}.{r.shape}.kernels_per_call"] = r.kernels.get(provider)
                elif provider in r.skipped:
                    reasons[r.skipped[provider]] = None  # a failed check: one reason for every shape
            for against in _AGAINST:
                if against != provider:
                    metrics[f"{direction}.speedup_vs_{against}_geomean"] = geomean(r.speedup(against, provider)
                                                                                  for r in rs)  # fmt: skip
        timed = any(name.endswith("_us") for name in metrics)
        status = "partial" if timed and reasons else "ok" if timed else "skipped"
        tags = {"perflab.kind": "kernels-provider", "perflab.case": self.case, "perflab.dtype": dtype_name,
                "perflab.provider": provider, "perflab.status": status}  # fmt: skip
        if reasons:
            tags["perflab.reason"] = "; ".join(reasons)[:4000]
            self._skipped += [f"{dtype_name} {provider} {why}" for why in reasons]
        params = {"case": self.case, "dtype": dtype_name, "provider": provider}
        return self._tracker.log_child(f"kernels:{self.case}:{dtype_name}:{provider}", params=params, metrics=metrics,
                                       tags=tags)  # fmt: skip

    def __enter__(self) -> KernelsTracker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        if exc_type is not None:
            self._tracker.__exit__(exc_type, exc, tb)  # FAILED (KILLED on Ctrl-C), tagged crashed
            return
        if self._skipped:
            self._files[f"{self.case}-skipped.txt"] = "\n".join(self._skipped) + "\n"
        if self._targets:
            self._files[f"{self.case}-targets.txt"] = "\n".join(self._targets) + "\n"
        if self._files:
            log_text_artifacts(self.parent, self._files, self._tracker.tracking_uri)
        self._tracker.close()
