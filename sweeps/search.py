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
"""

from __future__ import annotations

import datetime
import math
import random
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from bench.errors import ConfigError
from sweeps.config import SweepConfig
from sweeps.space import OTHER, PARAMS, Space, key
from sweeps.storage import check_fingerprint, make_storage, quiet_optuna
from sweeps.trial import Pruner, TrialOutcome

__all__ = ["PARAMS", "STRATEGIES", "PlanSampler", "propose", "results_rows", "run_sweep"]

STRATEGIES = ("grid", "smart", "pareto")
MEASURED = ("ok", "oom", "failed", "timeout", "pruned")  # a configuration that ran
Evaluate = Callable[[dict[str, Any], Pruner | None], TrialOutcome]
History = Sequence[tuple[dict[str, Any], str, float | None]]  # (config, status, samples/s); running ⇒ "running"
_DECLINE = 0.97  # the ladder stops once two successive batch sizes fall 3 % below its best: past the peak
_MAX_SKIPS = 40  # pareto: this many proposals in a row already measured or invalid ⇒ the space is spent
_FAIL_FAST = 3  # this many failed trials and none that ran ⇒ the workload is broken, not a configuration


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


def _status(t: FrozenTrial) -> str:
    if t.state == TrialState.RUNNING:
        return "running"
    if t.state == TrialState.WAITING:
        return "waiting"
    # FAIL without a status: its worker died mid-trial (failed through the heartbeat): not measured
    return str(t.user_attrs.get("status", "interrupted" if t.state == TrialState.FAIL else "failed"))


def _history(study: optuna.Study, exclude: int | None = None) -> list[tuple[dict[str, Any], str, float | None]]:
    out = []
    for t in study.get_trials(deepcopy=False):
        c = config_of(t)
        if t.number == exclude or c is None:
            continue
        if t.user_attrs.get("status") == "skipped" and "config" not in t.user_attrs:
            continue  # skipped before it had a configuration (nothing left, invalid): its params mean nothing
        out.append((c, _status(t), t.user_attrs.get("metrics", {}).get("samples_per_s")))
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
        p = self._plan(_history(study, exclude=trial.number))
        if p is None:
            self.exhausted.add(trial.number)
            return {}
        return p

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        assert isinstance(param_distribution, CategoricalDistribution)
        return param_distribution.choices[0]


def _sampler(strategy: str, space: Space, seed: int) -> BaseSampler:
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


def _reap_zombies(study: optuna.Study, limit_s: float) -> None:
    """A RUNNING trial older than any live trial can be (the trial timeout, the heartbeat's grace and a
    margin) whose heartbeat never came — its worker died before the first one, or an older perflab ran
    it without heartbeats — is marked interrupted: the heartbeat would never fail it."""
    now = datetime.datetime.now()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.datetime_start is not None and (now - t.datetime_start).total_seconds() > limit_s:
            study._storage.set_trial_user_attr(t._trial_id, "status", "interrupted")
            study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)


def _requeue_interrupted(study: optuna.Study) -> list[int]:
    """Trials cut short by Ctrl-C or reaped as zombies (FAIL with status "interrupted") are queued
    again, unless a later trial already has their configuration. A younger RUNNING trial is left to
    the heartbeat: it may be another worker's, alive."""
    trials = study.get_trials(deepcopy=False)

    def params(t: FrozenTrial) -> dict[str, Any]:
        return dict(t.params or t.system_attrs.get("fixed_params", {}))

    numbers = []
    for t in trials:
        if t.state != TrialState.FAIL or t.user_attrs.get("status") != "interrupted":
            continue
        if any(u.number > t.number and params(u) == params(t) for u in trials):
            continue
        if all(k in t.params for k in PARAMS):
            study.enqueue_trial({k: t.params[k] for k in PARAMS}, skip_if_exists=False)
        numbers.append(t.number)
    return numbers


def measured_count(study: optuna.Study) -> int:
    return sum(t.user_attrs.get("status") in MEASURED for t in study.get_trials(deepcopy=False))


def clearly_worse(interim: dict[str, Any], finished: list[dict[str, Any]], ratio: float, pareto: bool) -> str | None:
    """Why a trial's interim numbers are clearly worse than a finished ok trial, or None.

    Clearly worse: below ``ratio`` × that trial's samples/s; for pareto only against a trial that also
    used no more memory (a slow but small configuration may be on the front)."""
    sps, mem = interim.get("samples_per_s"), interim.get("peak_memory_gb")
    if sps is None:
        return None
    for r in sorted(finished, key=lambda r: -(r.get("samples_per_s") or 0)):
        other = r.get("samples_per_s")
        if other is None or sps >= ratio * other:
            continue
        if pareto and (mem is None or r.get("peak_memory_gb") is None or r["peak_memory_gb"] > mem):
            continue
        return (
            f"pruned after {interim.get('steps')} measured steps: {sps:.0f} samples/s is under "
            f"{ratio:g} x trial {r['trial']}'s {other:.0f}" + (" with no more memory" if pareto else "")
        )
    return None


def run_sweep(
    cfg: SweepConfig,
    evaluate: Evaluate,
    strategy: str = "grid",
    n_trials: int | None = None,
    storage: str | optuna.storages.BaseStorage | None = None,
    study_name: str = "perflab-sweep",
    callbacks: Sequence[Callable[[optuna.Study, FrozenTrial], None]] = (),
    cuda: bool = True,
    fingerprint: dict[str, Any] | None = None,
    resume: bool = False,
    echo: Callable[[str], None] = lambda _: None,
) -> optuna.Study:
    """Run (or resume, or join) the study until ``n_trials`` configurations are measured (default: all
    of the space; smart and grid also stop when nothing is left), starting none after
    ``cfg.time_budget_s``. With other workers on the study, waits for their trials to end or to be
    failed by the heartbeat (and then runs the retries) before returning."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, but got {strategy!r}")
    space = cfg.space(cuda)
    sampler = _sampler(strategy, space, cfg.seed)
    pareto = strategy == "pareto"
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # "Trial N failed ...": the sweep's own line says it once
    store = make_storage(storage, cfg.heartbeat_interval_s, cfg.heartbeat_grace_s, cfg.max_retry)
    study = optuna.create_study(
        study_name=study_name, storage=store, sampler=sampler, load_if_exists=True,
        directions=["maximize", "minimize"] if pareto else ["maximize"],
    )  # fmt: skip
    if fingerprint is not None:
        note = check_fingerprint(study, {**fingerprint, "strategy": strategy}, resume)
        if note:
            echo(note)
    zombie_s = cfg.trial_timeout_s + cfg.heartbeat_grace_s + 60.0
    _reap_zombies(study, zombie_s)
    _requeue_interrupted(study)
    if existing := measured_count(study):
        echo(f"study {study_name!r} holds {existing} measured configuration(s): resuming it (nothing is measured "
             "twice; --study-name NEW starts afresh)")  # fmt: skip
    target = n_trials or space.size()
    t_end = None if cfg.time_budget_s is None else time.monotonic() + cfg.time_budget_s
    prune = strategy != "grid" and cfg.prune_after_steps > 0
    skips = [0]

    def skip(trial: optuna.Trial, reason: str, stop: bool = False) -> float:
        trial.set_user_attr("status", "skipped")
        trial.set_user_attr("reason", reason)
        skips[0] += 1
        if stop or (pareto and skips[0] >= _MAX_SKIPS):
            study.stop()
        raise optuna.TrialPruned()

    def objective(trial: optuna.Trial) -> Any:
        raw = {k: trial.suggest_categorical(k, v) for k, v in space.values.items()}
        if trial.number in getattr(sampler, "exhausted", ()):
            return skip(trial, "nothing left to measure", stop=True)
        params = space.canonical(raw)
        if params is None:
            return skip(trial, f"batch {raw['batch_size']} is not a multiple of grad_accum {raw['grad_accum']}")
        trial.set_user_attr("config", params)
        others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
        for t in others:  # measured already, or being measured by a worker that asked first
            c = config_of(t)
            if c is not None and key(c) == key(params):
                s = _status(t)
                if s in MEASURED or s == "waiting" or (s == "running" and t.number < trial.number):
                    return skip(trial, "already measured" if s != "running" else f"trial {t.number} is measuring it")
        history = _history(study, exclude=trial.number)
        wall = blocked_by_wall(params, history)
        if wall is not None:
            return skip(trial, f"batch {wall} ran out of memory with the same other settings")
        rows = [{"trial": t.number, **t.user_attrs.get("metrics", {})} for t in others
                if t.user_attrs.get("status") == "ok"]  # fmt: skip
        pruner: Pruner | None = None
        if prune:
            pruner = lambda interim: clearly_worse(interim, rows, cfg.prune_ratio, pareto)  # noqa: E731
        skips[0] = 0
        try:
            outcome = evaluate(params, pruner)
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
        if outcome.workload_error:
            from sweeps.workload import WorkloadError

            raise WorkloadError(outcome.error or "the workload could not be built")
        if outcome.status in ("oom", "pruned"):
            raise optuna.TrialPruned()
        if outcome.status != "ok":
            failed = [t for t in others if t.user_attrs.get("status") == "failed"]
            ran = [t for t in others if t.user_attrs.get("status") in ("ok", "oom", "pruned")]
            if outcome.status == "failed" and len(failed) + 1 >= _FAIL_FAST and not ran:
                first = (outcome.error or "").splitlines()[0]
                raise ConfigError(
                    f"the first {len(failed) + 1} trials failed and none ran; the last: {first} "
                    "(fix the workload; each trial's error is in the study and in MLflow)"
                )
            return (math.nan, math.nan) if pareto else math.nan  # Optuna records FAIL; the status says why
        sps = float(outcome.metrics["samples_per_s"])
        return (sps, float(outcome.metrics.get("peak_memory_gb") or math.nan)) if pareto else sps

    def enough(study: optuna.Study, _: FrozenTrial) -> None:
        if measured_count(study) >= target:
            study.stop()

    heartbeat = bool(getattr(store, "is_heartbeat_enabled", lambda: False)())
    plan = getattr(sampler, "_plan", None)
    while True:
        left = None if t_end is None else t_end - time.monotonic()
        if (left is not None and left <= 0) or measured_count(study) >= target:
            break
        with quiet_optuna():
            study.optimize(objective, n_trials=None, timeout=left, callbacks=[*callbacks, enough], catch=())
        if measured_count(study) >= target or (t_end is not None and time.monotonic() >= t_end):
            break
        # Nothing left to start here. Another worker's trials may still run: wait for them to end, or
        # to be failed by the heartbeat and come back as queued retries; their results may also give
        # the plan something new.
        while heartbeat and not (t_end is not None and time.monotonic() >= t_end):
            with quiet_optuna():
                optuna.storages.fail_stale_trials(study)
            _reap_zombies(study, zombie_s)
            _requeue_interrupted(study)
            if not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                break
            if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
                break
            time.sleep(min(cfg.heartbeat_interval_s, 2.0))
        if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            continue
        if heartbeat and plan is not None and plan(_history(study)) is not None:
            continue
        break
    return study


def results_rows(study: optuna.Study) -> list[dict[str, Any]]:
    """One flat row per finished trial: configuration, status, measurements (the results table)."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        c = config_of(t)
        if not t.state.is_finished() or c is None:
            continue
        if t.state == TrialState.FAIL and "status" not in t.user_attrs:
            continue  # its worker died; the retry carries the configuration
        if t.user_attrs.get("reason") == "nothing left to measure":
            continue  # the marker a plan leaves when it is spent
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
