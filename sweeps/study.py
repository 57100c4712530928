"""Driving an Optuna study of training configurations: run, resume or join it until it holds its trials.

The study in its storage is the record, so an interrupted sweep resumes where it stopped: finished
trials are never run again, and a trial cut short is queued again (Ctrl-C here; a dead worker through
the storage's heartbeat, ``sweeps.storage``). Several workers may run one study:

* a configuration another worker is measuring is not started twice;
* ``n_trials`` is the *study's* total, as Optuna's ``MaxTrialsCallback`` counts it but decided before a
  trial runs: trial k runs only while fewer than ``n_trials`` trials numbered below k were measured or
  are running, so two workers never overshoot together;
* a worker whose own plan is spent waits for the others' trials to end (or to be failed by the
  heartbeat, then runs the retries) before it returns: what follows (``sweeps.final``) sees the
  study's whole table;
* a worker whose trial another worker failed as stale while it ran (its heartbeat came late: a loaded
  host, a slow database) drops that result, says so, and goes on: the trial's retry is queued.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from bench.errors import ConfigError
from sweeps.config import SweepConfig
from sweeps.search import (
    FULL,
    MEASURED,
    NOTHING_LEFT,
    PARAMS,
    blocked_by_wall,
    check_strategy,
    config_of,
    history_of,
    sampler_for,
    status_of,
)  # fmt: skip
from sweeps.space import Space, key
from sweeps.storage import check_fingerprint, make_storage, quiet_optuna
from sweeps.trial import Pruner, TrialOutcome

__all__ = ["Evaluate", "clearly_worse", "measured_count", "run_sweep", "settle"]

Evaluate = Callable[[dict[str, Any], Pruner | None], TrialOutcome]
_MAX_SKIPS = 40  # pareto: this many proposals in a row already measured or invalid ⇒ the space is spent
_FAIL_FAST = 3  # this many failed trials and none that ran ⇒ the workload is broken, not a configuration


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


class Reaped(RuntimeError):
    """This worker's trial was failed by another's stale-heartbeat check while it ran (a heartbeat came late:
    a loaded host, a slow database); Optuna then refuses its result. The retry is queued; the worker goes on."""


class _Objective:
    """One Optuna trial: the configuration the plan proposed, skipped when it needs no run (measured or
    being measured, behind an OOM wall, the study full), else measured by ``evaluate``."""

    def __init__(self, cfg: SweepConfig, space: Space, study: optuna.Study, evaluate: Evaluate, strategy: str,
                 target: int, exhausted: set[int]) -> None:  # fmt: skip
        self.cfg, self.space, self.study, self.evaluate, self.target = cfg, space, study, evaluate, target
        self.pareto, self.exhausted = strategy == "pareto", exhausted
        self.prune = strategy != "grid" and cfg.prune_after_steps > 0
        self.skips = 0
        self.number: int | None = None  # the trial being run
        self.broken: ConfigError | None = None  # every trial failed: raised once this trial's line is printed

    def __call__(self, trial: optuna.Trial) -> Any:
        self.number = trial.number
        raw = {k: trial.suggest_categorical(k, v) for k, v in self.space.values.items()}
        if trial.number in self.exhausted:
            return self._skip(trial, NOTHING_LEFT, stop=True)
        params = self.space.canonical(raw)
        if params is None:
            return self._skip(trial, f"batch {raw['batch_size']} is not a multiple of grad_accum {raw['grad_accum']}")
        trial.set_user_attr("config", params)
        others = [t for t in self.study.get_trials(deepcopy=False) if t.number != trial.number]
        why = self._needs_no_run(trial.number, params, others)
        if why is not None:
            return self._skip(trial, why, stop=why == FULL)
        self.skips = 0
        try:
            outcome = self.evaluate(params, self._pruner(others))
        except BaseException:  # Ctrl-C or a crash of the sweep itself: the configuration is run again on resume
            trial.set_user_attr("status", "interrupted")
            raise
        if self.study._storage.get_trial(trial._trial_id).state != TrialState.RUNNING:
            raise Reaped(f"trial {trial.number}")  # failed as stale by another worker meanwhile: its retry is queued
        self._record(trial, params, outcome)
        return self._value(trial.number, params, outcome, others)

    def _skip(self, trial: optuna.Trial, reason: str, stop: bool = False) -> float:
        trial.set_user_attr("status", "skipped")
        trial.set_user_attr("reason", reason)
        self.skips += 1
        if stop or (self.pareto and self.skips >= _MAX_SKIPS):
            self.study.stop()
        raise optuna.TrialPruned()

    def _needs_no_run(self, number: int, params: dict[str, Any], others: list[FrozenTrial]) -> str | None:
        ahead = 0
        for t in others:  # measured already, or being measured by a worker that asked first
            c, s = config_of(t), status_of(t)
            if c is not None and key(c) == key(params):
                if s in MEASURED or s == "waiting" or (s == "running" and t.number < number):
                    return "already measured" if s != "running" else f"trial {t.number} is measuring it"
            if t.number < number and (s in MEASURED or (s in ("running", "waiting") and c is not None)):
                ahead += 1
        if ahead >= self.target:
            return FULL
        wall = blocked_by_wall(params, history_of(self.study, exclude=number))
        return None if wall is None else f"batch {wall} ran out of memory with the same other settings"

    def _pruner(self, others: list[FrozenTrial]) -> Pruner | None:
        if not self.prune:
            return None
        rows = [{"trial": t.number, **t.user_attrs.get("metrics", {})} for t in others
                if t.user_attrs.get("status") == "ok"]  # fmt: skip
        return lambda interim: clearly_worse(interim, rows, self.cfg.prune_ratio, self.pareto)

    @staticmethod
    def _record(trial: optuna.Trial, params: dict[str, Any], outcome: TrialOutcome) -> None:
        trial.set_user_attr("status", outcome.status)
        numbers = {k: v for k, v in outcome.metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        trial.set_user_attr("metrics", numbers)
        trial.set_user_attr("elapsed_s", outcome.elapsed_s)
        if outcome.error:
            trial.set_user_attr("error", outcome.error[:2000])
        if outcome.workload_error:
            from sweeps.workload import WorkloadError

            raise WorkloadError(f"trial {trial.number} ({_describe(params)}): "
                                f"{outcome.error or 'the workload could not be built'}")  # fmt: skip

    def _value(self, number: int, params: dict[str, Any], outcome: TrialOutcome, others: list[FrozenTrial]) -> Any:
        if outcome.status in ("oom", "pruned"):
            raise optuna.TrialPruned()
        if outcome.status != "ok":
            failed = [t for t in others if t.user_attrs.get("status") == "failed"]
            ran = [t for t in others if t.user_attrs.get("status") in ("ok", "oom", "pruned")]
            # every configuration tried failed: _FAIL_FAST of them, or all the sweep will run when it runs fewer
            if outcome.status == "failed" and len(failed) + 1 >= min(_FAIL_FAST, self.target) and not ran:
                first = min((t for t in failed if t.user_attrs.get("error")), key=lambda t: t.number, default=None)
                n, config, error = (number, params, outcome.error) if first is None else (
                    first.number, config_of(first) or {}, first.user_attrs["error"])  # fmt: skip
                why = next(iter((error or "").splitlines()), "") or "no error message"
                self.broken = ConfigError(
                    f"the first {len(failed) + 1} trials failed and none ran; the first, trial {n} "
                    f"({_describe(config)}): {why} (fix the workload; each trial's error is in the study and in "
                    "MLflow)"
                )  # fmt: skip
                self.study.stop()  # run_sweep raises it after the callbacks printed this trial's line
            return (math.nan, math.nan) if self.pareto else math.nan  # Optuna records FAIL; the status says why
        sps = float(outcome.metrics["samples_per_s"])
        return (sps, float(outcome.metrics.get("peak_memory_gb") or math.nan)) if self.pareto else sps


def _describe(params: dict[str, Any]) -> str:
    from sweeps.recommend import describe_config

    return describe_config(params)


def _open_study(cfg: SweepConfig, storage: Any, study_name: str, strategy: str, sampler: Any,
                fingerprint: dict[str, Any] | None, resume: bool,
                echo: Callable[[str], None]) -> optuna.Study:  # fmt: skip
    """Create, resume or join the study; refuse one measured otherwise; queue interrupted trials again."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # "Trial N failed ...": the sweep's own line says it once
    store = make_storage(storage, cfg.heartbeat_interval_s, cfg.heartbeat_grace_s, cfg.max_retry)
    study = optuna.create_study(
        study_name=study_name, storage=store, sampler=sampler, load_if_exists=True,
        directions=["maximize", "minimize"] if strategy == "pareto" else ["maximize"],
    )  # fmt: skip
    if fingerprint is not None:
        note = check_fingerprint(study, {**fingerprint, "strategy": strategy}, resume)
        if note:
            echo(note)
    _reap_zombies(study, _zombie_s(cfg))
    _requeue_interrupted(study)
    if existing := measured_count(study):
        echo(f"study {study_name!r} holds {existing} measured configuration(s): resuming it (nothing is measured "
             "twice; --study-name NEW starts afresh)")  # fmt: skip
    return study


def _zombie_s(cfg: SweepConfig) -> float:
    return cfg.trial_timeout_s + cfg.heartbeat_grace_s + 60.0


def _shared(study: optuna.Study) -> bool:
    """Other workers may share the study: its storage records heartbeats (an RDB made by make_storage)."""
    from optuna.storages._heartbeat import is_heartbeat_enabled  # what Optuna's fail_stale_trials asks

    return is_heartbeat_enabled(study._storage)


def _others_running(study: optuna.Study, cfg: SweepConfig, t_end: float | None) -> None:
    """Wait while other workers' trials run: until they end, are failed by the heartbeat (and queued
    again), or the time budget ends."""
    while _shared(study) and not (t_end is not None and time.monotonic() >= t_end):
        with quiet_optuna():
            optuna.storages.fail_stale_trials(study)
        _reap_zombies(study, _zombie_s(cfg))
        _requeue_interrupted(study)
        if not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            return
        if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return
        time.sleep(min(cfg.heartbeat_interval_s, 2.0))


def settle(study: optuna.Study, cfg: SweepConfig, target: int, quiet_s: float | None = None) -> None:
    """On a shared study short of ``target`` measured configurations, wait until it holds them, or until no
    trial has run or been added for ``quiet_s`` (default two heartbeats, at least 2 s): between one trial's
    end and its next start another worker runs none, and a worker that concluded in that gap would conclude
    on a table about to grow. Bounded by the trial timeout and the quiet time."""
    if not _shared(study):
        return
    quiet_s = max(2.0, 2.0 * cfg.heartbeat_interval_s) if quiet_s is None else quiet_s
    deadline = time.monotonic() + cfg.trial_timeout_s + quiet_s
    seen, since = -1, time.monotonic()
    while measured_count(study) < target and time.monotonic() < deadline:
        trials = study.get_trials(deepcopy=False)
        busy = any(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in trials)
        if not busy and trials and trials[-1].user_attrs.get("reason") == NOTHING_LEFT:
            return  # the plan, read from the whole study, is spent: another worker's next trial would find the same
        if busy or len(trials) != seen:
            seen, since = len(trials), time.monotonic()
            if busy:
                _others_running(study, cfg, None)
                continue
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(min(1.0, quiet_s / 5))


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
    """Run (or resume, or join) the study until it holds ``n_trials`` measured configurations (default:
    all of the space; smart and grid also stop when nothing is left), starting none after
    ``cfg.time_budget_s``; then wait for the other workers' trials to end (module docstring)."""
    check_strategy(strategy)
    space = cfg.space(cuda)
    sampler = sampler_for(strategy, space, cfg.seed)
    study = _open_study(cfg, storage, study_name, strategy, sampler, fingerprint, resume, echo)
    target = n_trials or space.size()
    t_end = None if cfg.time_budget_s is None else time.monotonic() + cfg.time_budget_s
    objective = _Objective(cfg, space, study, evaluate, strategy, target, getattr(sampler, "exhausted", set()))

    def enough(study: optuna.Study, _: FrozenTrial) -> None:
        if measured_count(study) >= target:
            study.stop()

    def out_of_time() -> bool:
        return t_end is not None and time.monotonic() >= t_end

    plan = getattr(sampler, "_plan", None)
    while measured_count(study) < target and not out_of_time():
        left = None if t_end is None else t_end - time.monotonic()
        try:
            with quiet_optuna():
                study.optimize(objective, n_trials=None, timeout=left, callbacks=[*callbacks, enough], catch=())
        except ValueError as exc:  # "Cannot tell a FAIL trial": Optuna's answer to a result for a reaped trial
            if not str(exc).startswith("Cannot tell a") or objective.number is None:
                raise
            echo(f"trial {objective.number}: failed by another worker while measured here (its heartbeat came "
                 "late); its retry is queued")  # fmt: skip
            continue
        if objective.broken is not None:
            raise objective.broken
        if measured_count(study) >= target or out_of_time():
            break
        # Nothing left to start here (or a callback stopped the study). Another worker's trials may still
        # run, may come back as queued retries, or may give the plan something new.
        if not _shared(study):
            break
        _others_running(study, cfg, t_end)
        if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            continue
        if not (plan is not None and plan(history_of(study)) is not None):
            break
    _others_running(study, cfg, t_end)  # the study's trials all ended: its table is whole
    return study
