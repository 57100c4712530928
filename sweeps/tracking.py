"""MLflow for a sweep: one parent run, one nested run per trial (params, metrics, ``perflab.status``).

A thin layer over ``bench.tracking.Tracker`` (the only module that talks to MLflow): the parent is
adopted from ``MLFLOW_RUN_ID`` under ``mlflow run`` (which owns and terminates it), else created and
finished here. Only measured numbers are logged: a trial that ran out of memory has params and status,
no metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optuna.trial import FrozenTrial

from bench.tracking import Tracker

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
        status = trial.user_attrs.get("status", trial.state.name.lower())
        p = trial.params
        name = (
            f"trial {trial.number}: bs={p.get('batch_size')} w={p.get('num_workers')} "
            f"amp={p.get('amp')} pin={p.get('pin_memory')}"
        )
        tags = {"perflab.kind": "sweep-trial", "perflab.status": status, "optuna.trial_number": str(trial.number)}
        if trial.user_attrs.get("reason") or trial.user_attrs.get("error"):
            tags["perflab.reason"] = str(trial.user_attrs.get("reason") or trial.user_attrs["error"])[:4000]
        metrics = {**trial.user_attrs.get("metrics", {}), "trial_elapsed_s": trial.user_attrs.get("elapsed_s")}
        return self._tracker.log_child(name, params=p, metrics=metrics, tags=tags)

    def finish(self, metrics: Mapping[str, float], artifacts: Mapping[str, str], ok: bool = True) -> None:
        self._tracker.log_parent(metrics=metrics)
        self._tracker.close(artifacts, failed=not ok)
