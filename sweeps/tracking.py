"""MLflow for a sweep: one parent run, one nested run per trial (params, metrics, ``perflab.status``).

Uses ``MlflowClient`` with explicit run ids like ``bench.tracking``. The parent is adopted from
``MLFLOW_RUN_ID`` under ``mlflow run`` (which owns and terminates it), else created and finished here.
Only measured numbers are logged: a trial that ran out of memory has params and status, no metrics.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID
from optuna.trial import FrozenTrial

from bench.tracking import DEFAULT_EXPERIMENT, _name, _param_value

__all__ = ["SweepTracker"]


class SweepTracker:
    def __init__(
        self, run_name: str, params: Mapping[str, Any], experiment: str | None = None, tracking_uri: str | None = None
    ) -> None:
        self.client = MlflowClient(tracking_uri=tracking_uri)
        adopted = os.environ.get("MLFLOW_RUN_ID")
        if adopted:
            self.parent = adopted
            self.experiment_id = self.client.get_run(adopted).info.experiment_id
        else:
            name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
            found = self.client.get_experiment_by_name(name)
            self.experiment_id = found.experiment_id if found else self.client.create_experiment(name)
            self.parent = self.client.create_run(self.experiment_id, run_name=run_name).info.run_id
        self._owned = not adopted
        self.client.log_batch(
            self.parent,
            params=[Param(_name(k), _param_value(v)) for k, v in params.items()],
            tags=[RunTag("perflab.kind", "sweep")],
        )

    def log_trial(self, trial: FrozenTrial) -> str:
        status = trial.user_attrs.get("status", trial.state.name.lower())
        p = trial.params
        name = (
            f"trial {trial.number}: bs={p.get('batch_size')} w={p.get('num_workers')} "
            f"amp={p.get('amp')} pin={p.get('pin_memory')}"
        )
        tags = {MLFLOW_PARENT_RUN_ID: self.parent, "perflab.kind": "sweep-trial", "perflab.status": status,
                "optuna.trial_number": str(trial.number)}  # fmt: skip
        if trial.user_attrs.get("reason") or trial.user_attrs.get("error"):
            tags["perflab.reason"] = str(trial.user_attrs.get("reason") or trial.user_attrs["error"])[:4000]
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        now = int(time.time() * 1000)
        metrics = {**trial.user_attrs.get("metrics", {}), "trial_elapsed_s": trial.user_attrs.get("elapsed_s")}
        self.client.log_batch(
            run.info.run_id,
            metrics=[
                Metric(_name(k), float(v), now, 0) for k, v in metrics.items() if v is not None and math.isfinite(v)
            ],
            params=[Param(k, _param_value(v)) for k, v in p.items()],
        )
        self.client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FINISHED))
        return str(run.info.run_id)

    def finish(self, metrics: Mapping[str, float], artifacts: Mapping[str, str], ok: bool = True) -> None:
        now = int(time.time() * 1000)
        self.client.log_batch(
            self.parent, metrics=[Metric(_name(k), float(v), now, 0) for k, v in metrics.items() if math.isfinite(v)]
        )
        with tempfile.TemporaryDirectory() as tmp:
            for fname, content in artifacts.items():
                path = Path(tmp) / fname
                path.write_text(content)
                self.client.log_artifact(self.parent, str(path))
        if self._owned:
            self.client.set_terminated(self.parent, RunStatus.to_string(RunStatus.FINISHED if ok else RunStatus.FAILED))
