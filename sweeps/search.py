"""The Optuna study: grid (exhaustive), smart (a ladder to the memory wall) or pareto (multi-objective TPE).

grid and smart maximise throughput (samples/s); pareto maximises throughput and minimises peak memory
(``study.best_trials`` is the Pareto front). A trial's ``user_attrs`` hold the status
(``ok|oom|timeout|failed|pruned|skipped``), the configuration, the measurements and the error; the study
in its storage is the record, so an interrupted sweep resumes where it stopped: finished trials are
never run again, and a trial cut short is queued again (Ctrl-C here; a dead worker through the
storage's heartbeat, ``sweeps.storage``). Several workers may run one study; a configuration another
worker is measuring is not started twice.

OOM ⇒ the trial is pruned, and every larger batch size with the same other settings is *skipped*
(pruned without running): memory grows with the batch, so they would hit the same wall. smart and
pareto also stop a trial that is clearly worse after its first measured steps (``prune_after_steps``).

This module holds the plans (what to measure next) and the study's table; ``sweeps.study`` drives
the study with them.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from sweeps.space import OTHER, PARAMS, Space, key

__all__ = [
    "MARKERS",
    "MEASURED",
    "PARAMS",
    "STRATEGIES",
    "PlanSampler",
    "check_strategy",
    "config_of",
    "propose",
    "results_rows",
    "sampler_for",
]

STRATEGIES = ("grid", "smart", "pareto")


def check_strategy(strategy: str) -> None:
    """``ConfigError`` naming a strategy that is none of ``STRATEGIES``."""
    if strategy not in STRATEGIES:
        from bench.errors import ConfigError

        raise ConfigError(f"--strategy {strategy!r}: accepted: {', '.join(STRATEGIES)}")


MEASURED = ("ok", "oom", "failed", "timeout", "pruned")  # a configuration that ran
# Reasons of trials that mark the study's state, not a configuration: never rows of its table.
NOTHING_LEFT, FULL = "nothing left to measure", "the study has its --n-trials"
MARKERS = (NOTHING_LEFT, FULL)
History = Sequence[tuple[dict[str, Any], str, float | None]]  # (config, status, samples/s); running ⇒ "running"
_DECLINE = 0.97  # the ladder stops once two successive batch sizes fall 3 % below its best: past the peak


def _walls(history: History) -> dict[tuple[Any, ...], int]:
    """Smallest OOM batch size per combination of the other settings."""
    walls: dict[tuple[Any, ...], int] = {}
    for p, status, _ in history:
        if status == "oom":
            o = key(p)[1:]
            walls[o] = min(walls.get(o, p["batch_size"]), p["batch_size"])
    return walls


def blocked_by_wall(params: dict[str, Any], history: History) -> int | None:
    """The OOM batch size that rules ``params`` out (same other settings, batch ≥ it), or None."""
    wall = _walls(history).get(key(params)[1:])
    return wall if wall is not None and params["batch_size"] >= wall else None


def propose(space: Space, history: History, seed: int = 0) -> dict[str, Any] | None:
    """The next configuration to measure, or None when every one is measured or behind a wall.

    1. Ladder: at the base settings (``Space.base``), batch sizes in ascending order until OOM or the
       throughput has clearly peaked — throughput rises with the batch until the device is saturated
       or memory runs out.
    2. Around the best configuration so far: each other knob's values in turn, then the batch sizes
       next to it; repeated whenever the best moves.
    3. The rest, nearest batch size to the best first (ties broken by a seeded shuffle).
    """
    visited = {key(p) for p, _, _ in history}

    def free(p: dict[str, Any] | None) -> bool:
        return p is not None and key(p) not in visited and blocked_by_wall(p, history) is None

    sizes = space.values["batch_size"]
    base = space.base()
    measured = {key(p): (s, v) for p, s, v in history}
    best_on_ladder, below = -math.inf, 0
    for b in sizes:
        p = space.canonical({"batch_size": b, **base})
        if p is None:
            continue
        if free(p):
            return p
        status, value = measured.get(key(p), ("oom", None))  # blocked ⇒ behind the wall
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
            for value in space.values[name]:
                if free(p := space.canonical({**best, name: value})):
                    return p
        for j in (i + 1, i - 1):
            if 0 <= j < len(sizes) and free(p := space.canonical({**best, "batch_size": sizes[j]})):
                return p
    rest = [p for p in space.points() if free(p)]
    if not rest:
        return None
    random.Random(seed + len(history)).shuffle(rest)
    target = sizes.index(max(ok, key=lambda pv: pv[1])[0]["batch_size"]) if ok else 0
    return min(rest, key=lambda p: abs(sizes.index(p["batch_size"]) - target))


def _grid_plan(space: Space, seed: int) -> Callable[[History], dict[str, Any] | None]:
    """Every configuration once, in a seeded random order (as Optuna's GridSampler); one behind a known
    wall is still proposed, and recorded as skipped without running (the table stays complete)."""
    order = space.points()
    random.Random(seed).shuffle(order)

    def plan(history: History) -> dict[str, Any] | None:
        visited = {key(p) for p, _, _ in history}
        return next((p for p in order if key(p) not in visited), None)

    return plan


def config_of(t: FrozenTrial) -> dict[str, Any] | None:
    """The configuration a trial measured (canonical), or None before it had one."""
    c = t.user_attrs.get("config") or t.params or t.system_attrs.get("fixed_params")  # fixed: queued
    return dict(c) if c and all(k in c for k in ("batch_size", "num_workers")) else None


def status_of(t: FrozenTrial) -> str:
    if t.state == TrialState.RUNNING:
        return "running"
    if t.state == TrialState.WAITING:
        return "waiting"
    # FAIL without a status: its worker died mid-trial (failed through the heartbeat): not measured
    return str(t.user_attrs.get("status", "interrupted" if t.state == TrialState.FAIL else "failed"))


def history_of(study: optuna.Study, exclude: int | None = None) -> list[tuple[dict[str, Any], str, float | None]]:
    out = []
    for t in study.get_trials(deepcopy=False):
        c = config_of(t)
        if t.number == exclude or c is None:
            continue
        if t.user_attrs.get("status") == "skipped" and "config" not in t.user_attrs:
            continue  # skipped before it had a configuration (nothing left, invalid): its params mean nothing
        if t.user_attrs.get("reason") in MARKERS:
            continue  # not run because the study was full: still to measure should it have room again
        out.append((c, status_of(t), t.user_attrs.get("metrics", {}).get("samples_per_s")))
    return out


class PlanSampler(BaseSampler):
    """Optuna sampler driving a plan (``propose`` or the grid's order); the configuration is sampled
    jointly. When the plan has nothing left it returns nothing and notes the trial as ``exhausted``."""

    def __init__(self, space: Space, plan: Callable[[History], dict[str, Any] | None]) -> None:
        self._space, self._plan = space, plan
        self.exhausted: set[int] = set()

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {k: CategoricalDistribution(v) for k, v in self._space.values.items()}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        # A queued trial (a retry, a re-run after Ctrl-C) brings its own configuration. trial.params says nothing
        # here: Optuna samples relatively at the first knob of several values, after it has set the single-valued
        # ones (batch_size [8]), and a plan never asked would leave a finished grid running forever.
        if not search_space or "fixed_params" in trial.system_attrs:
            return {}
        p = self._plan(history_of(study, exclude=trial.number))
        if p is None:
            self.exhausted.add(trial.number)
            return {}
        return p

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        assert isinstance(param_distribution, CategoricalDistribution)
        return param_distribution.choices[0]


def sampler_for(strategy: str, space: Space, seed: int) -> BaseSampler:
    if strategy == "grid":
        return PlanSampler(space, _grid_plan(space, seed))
    if strategy == "smart":
        return PlanSampler(space, lambda history: propose(space, history, seed))
    with warnings.catch_warnings():  # multivariate / constant_liar are "experimental" in Optuna's words
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # constant_liar: a trial running on another worker counts as a bad result, so two workers
        # do not pick the same region; few startup trials: sweeps have tens of trials, not thousands
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True, constant_liar=True, n_startup_trials=min(8, max(3, space.size() // 8))
        )


def _same(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    return a is not None and all(a.get(k) == b.get(k) for k in PARAMS)


def results_rows(study: optuna.Study) -> list[dict[str, Any]]:
    """One flat row per finished trial: configuration, status, measurements (the results table)."""
    rows = []
    trials = study.get_trials(deepcopy=False)
    for t in trials:
        c = config_of(t)
        if not t.state.is_finished() or c is None:
            continue
        if t.state == TrialState.FAIL and "status" not in t.user_attrs:
            continue  # its worker died; the retry carries the configuration
        if t.user_attrs.get("status") == "interrupted" and any(
            u.number > t.number and u.state.is_finished() and _same(config_of(u), c) for u in trials
        ):
            continue  # cut short by Ctrl-C or SIGTERM; the resumed sweep measured it again
        if t.user_attrs.get("reason") in MARKERS:
            continue  # a plan that was spent, a study that was full
        rows.append(
            {
                "trial": t.number,
                **{k: c.get(k) for k in PARAMS},
                "status": t.user_attrs.get("status", "failed"),
                **t.user_attrs.get("metrics", {}),
                "reason": t.user_attrs.get("reason") or (t.user_attrs.get("error") or "").split("\n")[0] or None,
            }
        )
    return rows
