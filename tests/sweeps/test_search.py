"""sweeps/search.py on synthetic objectives: smart vs the grid's best, OOM skips, resume."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna
import pytest

from bench.errors import ConfigError
from sweeps.config import SweepConfig
from sweeps.search import results_rows
from sweeps.study import clearly_worse, run_sweep
from sweeps.trial import TrialOutcome

BIG = SweepConfig(
    batch_sizes=[16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
    num_workers_options=[0, 2, 4, 8],
    preset="tiny",
)


def wall(p: dict[str, Any]) -> int:
    return 4096 if p["amp"] else 2048  # AMP halves activations: one more batch size fits


def throughput(p: dict[str, Any]) -> float:
    """Rises with the batch until saturation near 1024, a loader that wants 4 workers, AMP +40 %."""
    b = p["batch_size"]
    compute = 1e5 * b / (b + 256) * (1.4 if p["amp"] else 1.0) * (1.03 if p["pin_memory"] else 1.0)
    loader = 3e4 * (1 + min(p["num_workers"], 4))
    return min(compute, loader) * (0.9 if b >= 2048 else 1.0)


class Synthetic:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, p: dict[str, Any], prune: Any = None) -> TrialOutcome:
        self.calls.append(dict(p))
        if p["batch_size"] >= wall(p):
            return TrialOutcome("oom", error="simulated")
        return TrialOutcome("ok", {"samples_per_s": throughput(p), "step_ms": 1.0})


def grid_best(cfg: SweepConfig) -> float:
    return max(throughput(p) for p in cfg.space().points() if p["batch_size"] < wall(p))


def test_smart_reaches_grid_best_neighbourhood_in_a_fraction_of_the_grid() -> None:
    f = Synthetic()
    study = run_sweep(BIG, f, "smart", n_trials=30, storage=optuna.storages.InMemoryStorage(), study_name="s")
    assert BIG.grid_size() == 144
    assert study.best_value >= 0.95 * grid_best(BIG)
    # never measured a batch beyond a wall it had already hit with the same other settings
    seen_oom: set[tuple[Any, ...]] = set()
    for p in f.calls:
        other = (p["num_workers"], p["amp"], p["pin_memory"])
        assert not any(o[1:] == other and p["batch_size"] >= o[0] for o in seen_oom), p
        if p["batch_size"] >= wall(p):
            seen_oom.add((p["batch_size"], *other))


@pytest.mark.parametrize("strategy", ["grid", "smart"])
def test_a_space_whose_first_knobs_have_one_value_ends(strategy: str) -> None:
    """One batch size and one worker count (a CPU's first sweep): Optuna fixes those before it asks the plan
    for the rest, and a plan never asked proposed the measured configuration again forever."""
    cfg = SweepConfig(batch_sizes=[8], num_workers_options=[0], preset="tiny")
    assert cfg.space(False).size() == 2  # AMP off and on
    f = Synthetic()

    def guard(study: optuna.Study, _: Any) -> None:
        if len(study.trials) > 20:
            pytest.fail(f"{len(study.trials)} trials for a space of 2: the sweep does not end")

    study = run_sweep(cfg, f, strategy, storage=optuna.storages.InMemoryStorage(), study_name="one", cuda=False,
                      callbacks=[guard])  # fmt: skip
    assert sorted(c["amp"] for c in f.calls) == [False, True]
    assert len(study.trials) <= 3  # the two measured and at most one "nothing left" marker


def test_grid_is_exhaustive_and_skips_batches_past_an_oom() -> None:
    cfg = SweepConfig(batch_sizes=[16, 2048, 4096], num_workers_options=[0], test_pin_memory=False, preset="tiny")
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, study_name="g", direction="maximize")
    study.enqueue_trial(
        {"batch_size": 2048, "num_workers": 0, "amp": False, "pin_memory": False}
    )  # hits the wall first
    f = Synthetic()
    study = run_sweep(cfg, f, "grid", storage=storage, study_name="g")
    measured = {
        (r["batch_size"], r["amp"]): r["status"] for r in results_rows(study) if r["reason"] != "already measured"
    }
    assert measured == {(16, False): "ok", (2048, False): "oom", (4096, False): "skipped",
                        (16, True): "ok", (2048, True): "ok", (4096, True): "oom"}  # fmt: skip
    assert {"batch_size": 4096, "num_workers": 0, "amp": False, "pin_memory": False} not in f.calls
    assert len(f.calls) == 5 == len({tuple(c.values()) for c in f.calls})  # all but the one behind the wall, once


def test_resume_continues_without_repeating_finished_trials(tmp_path: Path) -> None:
    cfg = SweepConfig(batch_sizes=[16, 32], num_workers_options=[0, 2], test_mixed_precision=False,
                      test_pin_memory=False, preset="tiny")  # fmt: skip
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"

    class Interrupt(Synthetic):
        def __call__(self, p: dict[str, Any], prune: Any = None) -> TrialOutcome:
            if len(self.calls) == 2:
                self.calls.append(dict(p))
                raise KeyboardInterrupt
            return super().__call__(p)

    first = Interrupt()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, first, "grid", storage=storage, study_name="r")
    second = Synthetic()
    study = run_sweep(cfg, second, "grid", storage=storage, study_name="r")
    done_first = [first.calls[0], first.calls[1]]
    assert len(second.calls) == 2 and not any(c in done_first for c in second.calls)
    assert first.calls[2] in second.calls  # the interrupted configuration ran again
    rows = results_rows(study)  # the interrupted trial's row is gone: its configuration ran again
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert len({(r["batch_size"], r["num_workers"]) for r in rows}) == 4
    third = Synthetic()
    run_sweep(cfg, third, "grid", storage=storage, study_name="r")
    assert third.calls == []  # a finished study has nothing left to run


def test_time_budget_stops_starting_trials_and_the_study_resumes(tmp_path: Path) -> None:
    cfg = SweepConfig(batch_sizes=[16, 32, 64], num_workers_options=[0, 2], test_pin_memory=False, preset="tiny",
                      time_budget_s=0.25)  # fmt: skip
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"

    class Slow(Synthetic):
        def __call__(self, p: dict[str, Any], prune: Any = None) -> TrialOutcome:
            time.sleep(0.1)
            return super().__call__(p)

    first = Slow()
    run_sweep(cfg, first, "grid", storage=storage, study_name="t")
    assert 1 <= len(first.calls) <= 6  # ~0.25 s of 0.1 s trials; the one started last finishes
    rest = Synthetic()
    run_sweep(cfg.model_copy(update={"time_budget_s": None}), rest, "grid", storage=storage, study_name="t")
    assert len(first.calls) + len(rest.calls) == cfg.grid_size() == 12


def memory(p: dict[str, Any]) -> float:
    return p["batch_size"] / 1000 * (0.5 if p["amp"] else 1.0)


class Prunable(Synthetic):
    """Reports its interim numbers to the sweep's pruner, as a real trial does after its first steps."""

    def __init__(self) -> None:
        super().__init__()
        self.pruned: list[str] = []

    def __call__(self, p: dict[str, Any], prune: Any = None) -> TrialOutcome:
        out = super().__call__(p)
        if out.status != "ok":
            return out
        out.metrics["peak_memory_gb"] = memory(p)
        reason = prune({"samples_per_s": out.metrics["samples_per_s"], "peak_memory_gb": memory(p), "steps": 5}) \
            if prune else None  # fmt: skip
        if reason:
            self.pruned.append(reason)
            return TrialOutcome("pruned", {"interim_samples_per_s": out.metrics["samples_per_s"]}, reason)
        return out


def test_pareto_finds_a_front_and_prunes_only_dominated_trials() -> None:
    f = Prunable()
    cfg = BIG.model_copy(update={"prune_ratio": 0.5})
    study = run_sweep(cfg, f, "pareto", n_trials=25, storage=optuna.storages.InMemoryStorage(), study_name="p")
    rows = results_rows(study)
    measured = [r for r in rows if r["status"] != "skipped"]
    assert len(measured) == 25 and len(study.directions) == 2
    front = study.best_trials
    assert front and all(t.values[0] > 0 for t in front)
    assert f.pruned  # seeded: TPE proposes a few dominated configurations here
    for reason in f.pruned:
        assert "with no more memory" in reason
    for r in rows:  # a pruned trial was < half as fast as a finished one using no more memory
        if r["status"] == "pruned":
            sps, mem = r["interim_samples_per_s"], memory(r)
            faster = [o for o in rows if o["status"] == "ok" and o["samples_per_s"] > 2 * sps]
            assert any(o["peak_memory_gb"] <= mem for o in faster)


def test_clearly_worse_needs_a_margin_and_for_pareto_no_more_memory() -> None:
    done = [{"trial": 3, "samples_per_s": 1000.0, "peak_memory_gb": 4.0}]
    assert clearly_worse({"samples_per_s": 600.0, "steps": 5}, done, 0.5, pareto=False) is None
    why = clearly_worse({"samples_per_s": 400.0, "steps": 5}, done, 0.5, pareto=False)
    assert why == "pruned after 5 measured steps: 400 samples/s is under 0.5 x trial 3's 1000"
    small = {"samples_per_s": 400.0, "peak_memory_gb": 1.0, "steps": 5}
    assert clearly_worse(small, done, 0.5, pareto=True) is None  # slow but small: may be on the front
    assert clearly_worse({**small, "peak_memory_gb": 5.0}, done, 0.5, pareto=True).endswith("with no more memory")


def test_smart_prunes_and_the_grid_never_does() -> None:
    for strategy, expect in (("smart", True), ("grid", False)):
        f = Prunable()
        cfg = SweepConfig(batch_sizes=[16, 256, 1024], num_workers_options=[0, 4], test_pin_memory=False,
                          preset="tiny")  # fmt: skip
        run_sweep(cfg, f, strategy, storage=optuna.storages.InMemoryStorage(), study_name=strategy)
        assert bool(f.pruned) is expect, strategy


def test_a_cpu_sweep_never_pins_memory() -> None:
    f = Synthetic()
    cfg = SweepConfig(batch_sizes=[16, 32], num_workers_options=[0, 2], test_pin_memory=True, preset="tiny")
    run_sweep(cfg, f, "grid", storage=optuna.storages.InMemoryStorage(), study_name="c", cuda=False)
    assert len(f.calls) == 8 and not any(c["pin_memory"] for c in f.calls)


def test_a_study_measured_otherwise_is_refused_with_the_ways_on(tmp_path: Path) -> None:
    cfg = SweepConfig(batch_sizes=[16, 32], num_workers_options=[0], test_mixed_precision=False,
                      test_pin_memory=False, preset="tiny")  # fmt: skip
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = {"workload": "tiny", "data": "100:abc"}
    run_sweep(cfg, Synthetic(), "grid", storage=storage, study_name="s", fingerprint=first)
    again = Synthetic()
    run_sweep(cfg, again, "grid", storage=storage, study_name="s", fingerprint=first)
    assert again.calls == []  # same workload and data: resumed, nothing left
    other = {"workload": "tiny", "data": "999:def"}
    with pytest.raises(ConfigError) as err:
        run_sweep(cfg, Synthetic(), "grid", storage=storage, study_name="s", fingerprint=other)
    text = str(err.value)
    assert "study 's' (2 trials) was measured with a different data" in text and "\n" not in text
    assert "--study-name NEW" in text and "--resume" in text
    notes: list[str] = []
    run_sweep(cfg, Synthetic(), "grid", storage=storage, study_name="s", fingerprint=other, resume=True,
              echo=notes.append)  # fmt: skip
    assert any(n.startswith("--resume: adding to study 's'") for n in notes)
    # a study from before fingerprints: refused the same way
    old = optuna.create_study(storage=storage, study_name="old")
    old.add_trial(optuna.trial.create_trial(value=1.0))
    with pytest.raises(ConfigError, match="no record of what they measured"):
        run_sweep(cfg, Synthetic(), "grid", storage=storage, study_name="old", fingerprint=first)


def test_a_running_trial_that_never_beat_is_reaped_and_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as real

    import sweeps.study

    cfg = SweepConfig(batch_sizes=[16, 32], num_workers_options=[0], test_mixed_precision=False,
                      test_pin_memory=False, preset="tiny")  # fmt: skip
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, study_name="z")
    dist = {k: optuna.distributions.CategoricalDistribution(v) for k, v in cfg.space().values.items()}
    zombie = study.ask(dist)  # RUNNING, its worker gone before any heartbeat
    assert zombie.params["batch_size"] == 16 or zombie.params["batch_size"] == 32

    class Later:  # an hour on: older than any trial can run (timeout + grace + margin)
        class datetime:
            @staticmethod
            def now() -> real.datetime:
                return real.datetime.now() + real.timedelta(hours=1)

    monkeypatch.setattr(sweeps.study, "datetime", Later)
    f = Synthetic()
    study = run_sweep(cfg, f, "grid", storage=storage, study_name="z")
    rows = [r for r in results_rows(study) if r["status"] == "ok"]
    assert sorted(r["batch_size"] for r in rows) == [16, 32]  # the zombie's configuration measured too
    assert study.trials[zombie.number].user_attrs["status"] == "interrupted"


def test_a_trial_another_worker_failed_while_it_ran_is_retried_not_a_crash(tmp_path: Path) -> None:
    """Another worker's stale-heartbeat check fails this worker's trial mid-measurement (its heartbeat came
    late: a loaded host): Optuna refuses the result; the worker says so, goes on, and runs the queued retry."""
    from sweeps.storage import make_storage

    url = f"sqlite:///{tmp_path / 's.db'}"
    cfg = SweepConfig(batch_sizes=[16, 32], num_workers_options=[0], test_mixed_precision=False,
                      test_pin_memory=False, preset="tiny")  # fmt: skip
    said: list[str] = []
    calls: list[dict[str, Any]] = []

    def evaluate(p: dict[str, Any], prune: Any = None) -> TrialOutcome:
        calls.append(p)
        if len(calls) == 1:  # as optuna.storages.fail_stale_trials does it from the other worker
            other = make_storage(url)
            study = optuna.load_study(study_name="reap", storage=other)
            running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))[0]
            assert other.set_trial_state_values(running._trial_id, optuna.trial.TrialState.FAIL)
            other.get_heartbeat_stale_trial_callback()(study, other.get_trial(running._trial_id))  # type: ignore[misc]
        return TrialOutcome("ok", {"samples_per_s": float(p["batch_size"]), "memory_pct": 1.0})

    study = run_sweep(cfg, evaluate, "grid", storage=url, study_name="reap", echo=said.append)
    late = "trial 0: failed by another worker while measured here (its heartbeat came late); its retry is queued"
    assert late in said
    ok = sorted(r["batch_size"] for r in results_rows(study) if r["status"] == "ok")
    assert ok == [16, 32] and len(calls) == 3  # the reaped configuration measured again, by its retry


def test_a_worker_waits_for_another_workers_running_trial_before_it_returns(tmp_path: Path) -> None:
    """Two workers on one RDB study: this one's plan is spent while the other still measures a configuration;
    it returns only once that trial has ended, so the table it concludes on is the study's whole one."""
    import threading

    from sweeps.storage import make_storage

    url = f"sqlite:///{tmp_path / 's.db'}"
    cfg = SweepConfig(batch_sizes=[8, 16, 32], num_workers_options=[0], test_mixed_precision=False,
                      test_pin_memory=False, preset="tiny", heartbeat_interval_s=1, heartbeat_grace_s=4)  # fmt: skip
    other = make_storage(url, 1, 4)
    study = optuna.create_study(study_name="wait", storage=other, direction="maximize")
    dist = {k: optuna.distributions.CategoricalDistribution(v) for k, v in cfg.space().values.items()}
    theirs = study.ask({k: d for k, d in dist.items()})  # the other worker's trial, RUNNING
    config = {**theirs.params, "batch_size": 32}
    study._storage.set_trial_user_attr(theirs._trial_id, "config", config)
    ended = threading.Event()

    def other_worker() -> None:  # beats for 4 s, then records its result
        for _ in range(8):
            other.record_heartbeat(theirs._trial_id)
            time.sleep(0.5)
        other.set_trial_user_attr(theirs._trial_id, "status", "ok")
        other.set_trial_user_attr(theirs._trial_id, "metrics", {"samples_per_s": 32.0, "memory_pct": 1.0})
        study.tell(theirs, 32.0)
        ended.set()

    thread = threading.Thread(target=other_worker)
    thread.start()
    f = Synthetic()
    done = run_sweep(cfg, f, "grid", n_trials=3, storage=url, study_name="wait")
    returned_after_theirs = ended.is_set()
    thread.join()
    assert returned_after_theirs, "the worker returned while the other worker's trial still ran"
    assert sorted(c["batch_size"] for c in f.calls) == [8, 16]  # 32 was the other worker's
    assert sorted(r["batch_size"] for r in results_rows(done) if r["status"] == "ok") == [8, 16, 32]


def test_two_workers_creating_one_sqlite_study_file_together_both_open_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loser of the race to make a fresh database's schema sees SQLite's UNIQUE constraint on the
    schema-version row (PostgreSQL: duplicate key); a second look finds the winner's schema."""
    import sqlite3

    from sweeps.storage import make_storage

    real, tries = optuna.storages.RDBStorage, []

    def racing(url: str, **kwargs: Any) -> Any:
        tries.append(url)
        if len(tries) == 1:
            raise sqlite3.IntegrityError("UNIQUE constraint failed: alembic_version.version_num")
        return real(url, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", racing)
    storage = make_storage(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert len(tries) == 2 and storage.get_all_studies() == []


@pytest.mark.parametrize(("status", "error", "said"), [
    ("pruned", "773 samples/s is under 0.5 x trial 1's 1691", ": 773 samples/s is under 0.5 x trial 1's 1691"),
    ("failed", "ValueError: bad shape\nTraceback ...", ": ValueError: bad shape"),
    ("ok", None, ""),
])  # fmt: skip
def test_a_trials_line_says_why_it_was_pruned_or_failed(status: str, error: str | None, said: str) -> None:
    """A pruned trial's line said only "pruned": its rule (the interim rate against the leader's) was only in
    results.csv."""
    from types import SimpleNamespace

    from sweeps.runner import _reporter

    lines: list[str] = []
    sw = SimpleNamespace(echo=lines.append, tracker=None)
    attrs = {"status": status, "config": {"batch_size": 32, "num_workers": 0}, **({"error": error} if error else {})}
    _reporter(sw, lambda: None)(None, SimpleNamespace(number=4, user_attrs=attrs))  # type: ignore[arg-type]
    assert lines == [f"trial 4: bs=32 w=0 -> {status}{said}"], lines


def test_a_failed_trials_reason_wraps_under_its_line_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal at ``COLUMNS=80``, a failed trial's counted line with its reason (up to 300 characters) ran
    past the edge; it wraps between words, under the line's text."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    import bench.cli
    from sweeps.runner import _reporter

    out = Console(width=80, file=io.StringIO(), emoji=False, color_system=None)
    monkeypatch.setattr(bench.cli, "console", out)
    error = ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
             "dataloader's workers are out of shared memory (/dev/shm 64.0 MiB).")  # fmt: skip
    attrs = {"status": "failed", "config": {"batch_size": 4096, "num_workers": 8}, "error": error}
    trial = SimpleNamespace(number=3, user_attrs=attrs, params={}, system_attrs={})
    with bench.cli.progress("sweep", 6, out) as step:
        _reporter(SimpleNamespace(echo=print, tracker=None), lambda: step)(  # type: ignore[arg-type]
            SimpleNamespace(get_trials=lambda **_: []), trial
        )
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(lines) > 1 and all(len(x) <= 80 for x in lines), lines
    assert "trial 3: bs=4096 w=8" in lines[0] and all(x.startswith(" " * 8) and x[8] != " " for x in lines[1:]), lines
    assert " ".join(" ".join(lines).split()).endswith(f"trial 3: bs=4096 w=8 -> failed: {error}"), lines


def test_a_changed_space_names_the_entry_that_changed() -> None:
    """The space is a mapping of a dozen lists: cut at 60 characters it hid the one flag changed (--grad-accum 3)."""
    from sweeps.storage import check_fingerprint

    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(), study_name="s")
    space = {"batch_size": [32, 128, 512], "num_workers": [0, 2], "amp": [False, True], "grad_accum": [1]}
    check_fingerprint(study, {"space": space})
    study.add_trial(optuna.trial.create_trial(value=1.0))
    with pytest.raises(ConfigError) as err:
        check_fingerprint(study, {"space": {**space, "grad_accum": [3]}})
    assert "(space.grad_accum: [1] then, [3] now)" in str(err.value) and "batch_size" not in str(err.value)
