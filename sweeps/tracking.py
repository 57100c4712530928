"""MLflow for a sweep: one parent run, a nested run per trial and per verified configuration.

A thin layer over ``bench.record`` (the only module that talks to MLflow): the parent is adopted from
``MLFLOW_RUN_ID`` under ``mlflow run`` (which owns and terminates it), else created and finished here.
Only measured numbers are logged: a trial that ran out of memory has params and status, no metrics.
The parent gets the tables as text artifacts and the pictures as PNGs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optuna.trial import FrozenTrial

from bench.record import Tracker, log_text_artifacts

__all__ = ["SweepTracker"]


class SweepTracker:
    def __init__(
        self, run_name: str, params: Mapping[str, Any], experiment: str | None = None, tracking_uri: str | None = None
    ) -> None:
        self._tracker = Tracker(
            experiment=experiment, tracking_uri=tracking_uri, run_name=run_name, tags={"perflab.kind": "sweep"}
        )
        self.parent = self._tracker.start()
        self._tracker.log_parent(params=params)

    def log_trial(self, trial: FrozenTrial) -> str:
        from sweeps.recommend import describe_config
        from sweeps.search import config_of

        status = trial.user_attrs.get("status", trial.state.name.lower())
        config = config_of(trial) or dict(trial.params)
        name = f"trial {trial.number}: {describe_config(config)}" if "batch_size" in config else f"trial {trial.number}"
        tags = {"perflab.kind": "sweep-trial", "perflab.status": status, "optuna.trial_number": str(trial.number)}
        if trial.user_attrs.get("reason") or trial.user_attrs.get("error"):
            tags["perflab.reason"] = str(trial.user_attrs.get("reason") or trial.user_attrs["error"])[:4000]
        metrics = {**trial.user_attrs.get("metrics", {}), "trial_elapsed_s": trial.user_attrs.get("elapsed_s")}
        return self._tracker.log_child(name, params=config, metrics=metrics, tags=tags)

    def log_verified(self, side: Any) -> str:
        """One run per verified configuration (a ``sweeps.verify.Side``): its repeats and their interval."""
        from sweeps.recommend import describe_config

        metrics: dict[str, float | None] = {"samples_per_s": side.mean, "samples_per_s_ci_low": side.low,
                                            "samples_per_s_ci_high": side.high,
                                            "repeats_ok": float(len(side.samples_per_s)),
                                            "repeats": float(len(side.statuses))}  # fmt: skip
        metrics.update({f"samples_per_s_repeat_{i}": v for i, v in enumerate(side.samples_per_s)})
        ok = [o.metrics for o in side.outcomes if o.status == "ok"]
        for k in ("peak_memory_gb", "memory_pct", "gpu_util_pct", "io_wait_ms", "step_ms", "overhead_s"):
            values = [m[k] for m in ok if isinstance(m.get(k), int | float)]
            if values:
                metrics[f"median_{k}"] = sorted(values)[len(values) // 2]
        tags = {"perflab.kind": "sweep-verify", "perflab.role": side.label,
                "perflab.status": "ok" if side.samples_per_s else "failed"}  # fmt: skip
        if side.errors:
            tags["perflab.reason"] = "; ".join(sorted(set(side.errors)))[:4000]
        return self._tracker.log_child(
            f"verify {side.label}: {describe_config(side.params)}", params=side.params, metrics=metrics, tags=tags
        )

    def finish(
        self, metrics: Mapping[str, float], artifacts: Mapping[str, str | bytes], ok: bool = True,
        interrupted: bool = False,
    ) -> None:  # fmt: skip
        self._tracker.log_parent(metrics=metrics)
        pictures = {k: v for k, v in artifacts.items() if isinstance(v, bytes)}
        if pictures:
            log_text_artifacts(self.parent, pictures, tracking_uri=self._tracker.tracking_uri)
        self._tracker.close({k: v for k, v in artifacts.items() if isinstance(v, str)}, failed=not ok,
                            interrupted=interrupted)  # fmt: skip
