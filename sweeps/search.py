"""The Optuna study: grid (exhaustive) or smart (a sampler that climbs batch size to the memory wall).

A trial's value is its throughput (samples/s, maximised). Its ``user_attrs`` hold the status
(``ok|oom|timeout|failed|skipped``), the measurements and the error; the study in its storage is the
record, so an interrupted sweep resumes where it stopped (``load_if_exists``): finished trials are
never run again, and a trial left RUNNING by the interruption is marked FAIL and queued again.

OOM ⇒ the trial is pruned, and every larger batch size with the same other settings is *skipped*
(pruned without running): memory grows with the batch, so they would hit the same wall.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler, GridSampler
from optuna.trial import FrozenTrial, TrialState

from sweeps.config import SweepConfig
from sweeps.trial import TrialOutcome

__all__ = ["WallSampler", "default_storage", "propose", "results_rows", "run_sweep"]

PARAMS = ("batch_size", "num_workers", "amp", "pin_memory")
OTHER = PARAMS[1:]
Evaluate = Callable[[dict[str, Any]], TrialOutcome]
History = Sequence[tuple[dict[str, Any], str, float | None]]  # (params, status, samples/s); running ⇒ "running"
_DECLINE = 0.97  # the ladder stops once two successive batch sizes fall 3 % below its best: past the peak


def default_storage(directory: str | Path | None = None) -> str:
    """SQLite beside MLflow's default store (./mlflow.db, or the directory of a sqlite tracking URI)."""
    if directory is None:
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        directory = Path(uri.removeprefix("sqlite:///")).parent if uri.startswith("sqlite:///") else Path.cwd()
    return f"sqlite:///{Path(directory).resolve() / 'optuna.db'}"


def _key(p: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(p[k] for k in PARAMS)


def _walls(history: History) -> dict[tuple[Any, ...], int]:
    """Smallest OOM batch size per combination of the other settings."""
    walls: dict[tuple[Any, ...], int] = {}
    for p, status, _ in history:
        if status == "oom":
            o = tuple(p[k] for k in OTHER)
            walls[o] = min(walls.get(o, p["batch_size"]), p["batch_size"])
    return walls


def blocked_by_wall(params: dict[str, Any], history: History) -> int | None:
    """The OOM batch size that rules ``params`` out (same other settings, batch ≥ it), or None."""
    wall = _walls(history).get(tuple(params[k] for k in OTHER))
    return wall if wall is not None and params["batch_size"] >= wall else None


def propose(space: dict[str, list[Any]], history: History, seed: int = 0) -> dict[str, Any] | None:
    """The next configuration to measure, or None when every one is measured or behind a wall.

    1. Ladder: at a base setting (middle worker count, AMP and pinning on when offered), batch sizes
       in ascending order until OOM or the throughput has clearly peaked — throughput rises with the
       batch until the device is saturated or memory runs out.
    2. Around the best configuration so far: other worker counts, AMP, pinning, then the batch sizes
       next to it; repeated whenever the best moves.
    3. The rest, nearest batch size to the best first (ties broken by a seeded shuffle).
    """
    import random

    visited = {_key(p) for p, _, _ in history}

    def free(p: dict[str, Any]) -> bool:
        return _key(p) not in visited and blocked_by_wall(p, history) is None

    sizes = space["batch_size"]
    base = {
        "num_workers": space["num_workers"][len(space["num_workers"]) // 2],
        "amp": space["amp"][-1],
        "pin_memory": space["pin_memory"][-1],
    }
    measured = {_key(p): (s, v) for p, s, v in history}
    best_on_ladder, below = -math.inf, 0
    for b in sizes:
        p = {"batch_size": b, **base}
        if free(p):
            return p
        status, value = measured.get(_key(p), ("oom", None))  # blocked ⇒ behind the wall
        if status != "ok" or value is None:
            break
        below = below + 1 if value < _DECLINE * best_on_ladder else 0
        best_on_ladder = max(best_on_ladder, value)
        if below >= 2:
            break
    ok = [(p, v) for p, s, v in history if s == "ok" and v is not None]
    if ok:
        best = max(ok, key=lambda pv: pv[1])[0]
        i = sizes.index(best["batch_size"])
        for name in OTHER:
            for value in space[name]:
                p = {**best, name: value}
                if free(p):
                    return p
        for j in (i + 1, i - 1):
            if 0 <= j < len(sizes) and free(p := {**best, "batch_size": sizes[j]}):
                return p
    import itertools

    rest = [dict(zip(PARAMS, c, strict=True)) for c in itertools.product(*(space[k] for k in PARAMS))]
    rest = [p for p in rest if free(p)]
    if not rest:
        return None
    random.Random(seed + len(history)).shuffle(rest)
    target = sizes.index(max(ok, key=lambda pv: pv[1])[0]["batch_size"]) if ok else 0
    return min(rest, key=lambda p: abs(sizes.index(p["batch_size"]) - target))


def _history(study: optuna.Study, exclude: int | None = None) -> list[tuple[dict[str, Any], str, float | None]]:
    out = []
    for t in study.get_trials(deepcopy=False):
        if t.number == exclude or not all(k in t.params for k in PARAMS):
            continue
        status = t.user_attrs.get("status", "running" if t.state == TrialState.RUNNING else "failed")
        value = t.user_attrs.get("metrics", {}).get("samples_per_s")
        out.append((dict(t.params), status, value))
    return out


class WallSampler(BaseSampler):
    """Optuna sampler driving :func:`propose`; the whole configuration is sampled jointly."""

    def __init__(self, space: dict[str, list[Any]], seed: int = 0) -> None:
        self._space, self._seed = space, seed

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {k: CategoricalDistribution(v) for k, v in self._space.items()}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        p = propose(self._space, _history(study, exclude=trial.number), self._seed)
        return p if p is not None else {}  # nothing left: the objective sees a duplicate and stops the study

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        assert isinstance(param_distribution, CategoricalDistribution)
        return param_distribution.choices[0]


class _QueueAwareGrid(GridSampler):
    """GridSampler that also accepts queued trials (a configuration re-run after an interruption):
    Optuna's own leaves them without a grid id and fails when they finish."""

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        fixed = trial.system_attrs.get("fixed_params")
        if fixed is not None and "grid_id" not in trial.system_attrs:
            point = tuple(fixed[k] for k in self._param_names)
            study._storage.set_trial_system_attr(trial._trial_id, "search_space", self._search_space)
            study._storage.set_trial_system_attr(trial._trial_id, "grid_id", self._all_grids.index(point))
            return
        super().before_trial(study, trial)


def _finished(study: optuna.Study) -> int:
    return sum(t.state.is_finished() for t in study.get_trials(deepcopy=False))


def _requeue_interrupted(study: optuna.Study) -> list[int]:
    """Trials cut short (Ctrl-C: FAIL with status "interrupted"; a killed sweep: left RUNNING) are marked
    FAIL and their configuration is queued again, unless a later trial already has it."""
    trials = study.get_trials(deepcopy=False)

    def params(t: FrozenTrial) -> dict[str, Any]:
        return dict(t.params or t.system_attrs.get("fixed_params", {}))

    numbers = []
    for t in trials:
        cut = t.state == TrialState.RUNNING or (
            t.state == TrialState.FAIL and t.user_attrs.get("status") == "interrupted"
        )
        if not cut or any(u.number > t.number and params(u) == params(t) for u in trials):
            continue
        if t.state == TrialState.RUNNING:
            study._storage.set_trial_user_attr(t._trial_id, "status", "interrupted")
            study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        if all(k in t.params for k in PARAMS):
            study.enqueue_trial({k: t.params[k] for k in PARAMS}, skip_if_exists=False)
        numbers.append(t.number)
    return numbers


def run_sweep(
    cfg: SweepConfig,
    evaluate: Evaluate,
    strategy: str = "grid",
    n_trials: int | None = None,
    storage: str | optuna.storages.BaseStorage | None = None,
    study_name: str = "perflab-sweep",
    callbacks: Sequence[Callable[[optuna.Study, FrozenTrial], None]] = (),
) -> optuna.Study:
    """Run (or resume) the study until ``n_trials`` trials are finished (default: the grid's size),
    starting none after ``cfg.time_budget_s``."""
    space = cfg.space()
    if strategy == "grid":
        sampler: BaseSampler = _QueueAwareGrid(space, seed=cfg.seed)
    elif strategy == "smart":
        sampler = WallSampler(space, seed=cfg.seed)
    else:
        raise ValueError(f"strategy must be 'grid' or 'smart', but got {strategy=}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=study_name,
        storage=storage or default_storage(),
        sampler=sampler,
        direction="maximize",
        load_if_exists=True,
    )
    _requeue_interrupted(study)
    target = min(n_trials or cfg.grid_size(), cfg.grid_size() + len(study.trials))

    def objective(trial: optuna.Trial) -> float:
        params = {k: trial.suggest_categorical(k, v) for k, v in space.items()}
        history = _history(study, exclude=trial.number)
        if _key(params) in {_key(p) for p, s, _ in history if s != "interrupted"}:
            # smart: propose() found nothing left; grid: a point already measured through the queue
            trial.set_user_attr("status", "skipped")
            trial.set_user_attr("reason", "already measured")
            if strategy == "smart":
                study.stop()
            raise optuna.TrialPruned()
        wall = blocked_by_wall(params, history)
        if wall is not None:
            trial.set_user_attr("status", "skipped")
            trial.set_user_attr("reason", f"batch {wall} ran out of memory with the same other settings")
            raise optuna.TrialPruned()
        try:
            outcome = evaluate(params)
        except BaseException:  # Ctrl-C or a crash of the sweep itself: the configuration is run again on resume
            trial.set_user_attr("status", "interrupted")
            raise
        trial.set_user_attr("status", outcome.status)
        trial.set_user_attr(
            "metrics",
            {k: v for k, v in outcome.metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)},
        )
        trial.set_user_attr("elapsed_s", outcome.elapsed_s)
        if outcome.error:
            trial.set_user_attr("error", outcome.error[:2000])
        if outcome.status == "oom":
            raise optuna.TrialPruned()
        if outcome.status != "ok":
            return math.nan  # Optuna records FAIL; the status says why
        return float(outcome.metrics["samples_per_s"])

    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    if n_trials is None and strategy == "grid":
        # Until GridSampler stops the study; it would start a duplicate on an exhausted grid.
        done = {_key(p) for p, st, _ in _history(study) if st != "interrupted"}
        todo = len(done) < cfg.grid_size() or waiting
        if todo:
            study.optimize(objective, n_trials=None, timeout=cfg.time_budget_s, callbacks=list(callbacks), catch=())
    elif (remaining := target - _finished(study)) > 0:
        study.optimize(objective, n_trials=remaining, timeout=cfg.time_budget_s, callbacks=list(callbacks), catch=())
    return study


def results_rows(study: optuna.Study) -> list[dict[str, Any]]:
    """One flat row per finished trial: params, status, measurements (the results table)."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        if not t.state.is_finished() or not all(k in t.params for k in PARAMS):
            continue
        rows.append(
            {
                "trial": t.number,
                **{k: t.params[k] for k in PARAMS},
                "status": t.user_attrs.get("status", "failed"),
                **t.user_attrs.get("metrics", {}),
                "reason": t.user_attrs.get("reason") or (t.user_attrs.get("error") or "").split("\n")[0] or None,
            }
        )
    return rows
