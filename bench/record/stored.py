"""A run read back from the store as plain data (``StoredRun``): what ``analysis/`` and the commands see of MLflow's
runs, and the check that a run given where a suite is wanted is one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PARENT_RUN_ID = "mlflow.parentRunId"  # the tag MLflow nests runs by (mlflow.utils.mlflow_tags.MLFLOW_PARENT_RUN_ID)


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
        return self.tags.get(PARENT_RUN_ID)

    @property
    def is_variant(self) -> bool:
        """A variant run (nested, one benchmark file) rather than a suite's parent run."""
        return "perflab.variant" in self.tags

    def check_suite(self, given: str) -> None:
        """``ValueError`` for the run of another perflab command (a sweep, its trials, a profile, kernels, a peak:
        tag ``perflab.kind``) given where a suite's parent run is wanted: it has no pairs, and show, report and
        compare would print empty tables and exit 0. A variant run is each caller's own message."""
        kind = self.tags.get("perflab.kind")
        status = self.tags.get("perflab.suite_status")
        alone = "perflab.shard" not in self.tags  # a part of a sharded suite is read with its other parts
        if status and alone and self.metrics.get("n_variants") == 0:  # stopped before any variant finished
            raise ValueError(f"suite {given!r} ({self.name!r}) ended {_ENDED.get(status, repr(status))} before any "
                             "variant finished: it has no pairs; pass another suite's parent run")  # fmt: skip
        if kind is None or self.is_variant:
            return
        what = _KINDS.get(kind, f"{kind} run (tag perflab.kind={kind})")
        raise ValueError(f"run {given!r} is a {what} {self.name!r}, not a perflab suite; pass a suite's parent run "
                         "(perflab run, perflab ab; `perflab show` without --run-id takes the latest)")  # fmt: skip

    def check_variants(self, given: str, runs: list[StoredRun]) -> list[StoredRun]:
        """``runs`` (this suite's nested runs), or ``ValueError`` where none is a benchmark variant's: a run that is
        not a perflab suite (an MLflow run of the user's own), or one that has not logged a variant yet, gave an
        empty report, comparison or proof of benefit and exit status 0."""
        if any(r.is_variant for r in runs):
            return runs
        if self.status == "RUNNING" and any(k.startswith("perflab.") for k in self.tags):
            raise ValueError(f"suite {given!r} ({self.name!r}) is still running and has logged no variant yet; "
                             "pass it again once one has finished, or pass another suite's parent run")  # fmt: skip
        raise ValueError(f"run {given!r} ({self.name!r}) has no benchmark variant runs: it is not a perflab suite; "
                         "pass a suite's parent run (perflab run, perflab ab)")  # fmt: skip


# How a suite ended (tag perflab.suite_status), for the line that refuses one without variants
_ENDED = {"timeout": "at its --suite-timeout", "interrupted": "interrupted (Ctrl-C, SIGTERM)", "completed": "complete"}

# What the runs of perflab's other commands are, for the line that refuses one where a suite is wanted.
_KINDS = {"sweep": "sweep (perflab sweep run)", "sweep-trial": "sweep's trial", "sweep-verify": "sweep's "
          "verification run", "profile": "profile run (perflab profile)", "kernels": "kernel comparison (perflab "
          "kernels)", "kernels-provider": "kernel provider run (perflab kernels)", "selfcheck": "self-check run "
          "(perflab selfcheck)", "peak": "peak measurement (perflab peak)"}  # fmt: skip


def stored_run(run: Any) -> StoredRun:
    """An mlflow ``Run`` as plain data."""
    return StoredRun(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        experiment_id=run.info.experiment_id,
        status=run.info.status,
        start_time=int(run.info.start_time or 0),
        tags=dict(run.data.tags),
        metrics=dict(run.data.metrics),
    )
