"""Smart vs grid without a second GPU sweep: replay a strategy against a finished grid's measurements.

The grid measures every configuration once. A strategy is then run through the live sweep code —
``run_sweep`` with ``WallSampler`` → ``propose`` for smart, the very path of ``perflab sweep run
--strategy smart`` — but a trial looks the configuration up in the grid's results (status and
samples/s, OOMs included) instead of training. Counted: trials until one is within ``within`` (5 %)
of the grid's best throughput; the figure the issue targets is the median over seeds as a fraction
of the trials the grid ran. A random order over the same seeds is the baseline (a configuration
behind a known OOM wall is skipped without running in both, as a live sweep skips it).

What a replay cannot show: run-to-run noise (each configuration has the grid's single measurement)
and any effect of trial order on the measurements themselves.
"""

from __future__ import annotations

import csv
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from sweeps.config import SweepConfig
from sweeps.search import blocked_by_wall, results_rows
from sweeps.space import DEFAULTS, PARAMS, Space, key
from sweeps.study import run_sweep
from sweeps.trial import Pruner, TrialOutcome

__all__ = ["Replay", "grid_table", "load_results", "replay", "replay_markdown", "replay_random", "replay_smart"]

Key = tuple[Any, ...]
MEASURED = ("ok", "oom", "failed", "timeout")  # statuses of a configuration that ran


@dataclass(frozen=True)
class Outcome:
    status: str  # ok | oom | failed | timeout
    samples_per_s: float | None


@dataclass
class Replay:
    source: str
    space: dict[str, list[Any]]
    measured_trials: int  # configurations the grid ran (the rest were skipped behind an OOM wall)
    statuses: dict[str, int]  # the grid's measured outcomes by status (a skipped configuration is in none)
    best: float
    best_params: dict[str, Any]
    within: float
    qualifying: int  # configurations within ``within`` of the best
    seeds: list[int]
    smart: list[int | None]  # trials to the target per seed (None: never reached)
    random: list[int | None]
    smart_paths: list[list[tuple[dict[str, Any], Outcome]]] = field(default_factory=list)

    @property
    def grid_size(self) -> int:
        return Space(self.space).size()

    @property
    def skipped(self) -> int:
        """Configurations the grid skipped behind an OOM wall: replayed as OOMs, never run, so counted as none."""
        return self.grid_size - self.measured_trials

    @property
    def threshold(self) -> float:
        return (1 - self.within) * self.best


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if str(v).strip().lower() in ("true", "1", "yes"):
        return True
    if str(v).strip().lower() in ("false", "0", "no"):
        return False
    raise ConfigError(f"expected a boolean such as True/False in the results table, but got {v!r}")


def load_results(
    source: str | Path | None = None, storage: str | None = None, study_name: str | None = None
) -> list[dict[str, Any]]:
    """A grid's rows: a ``results.csv`` that ``perflab sweep run --out`` (or the MLflow artifact) wrote,
    or the study itself (``storage`` + ``study_name``), which also holds a sweep cut short."""
    if storage is not None:
        import optuna

        if study_name is None:
            raise ConfigError("--storage needs --study-name (e.g. perflab-sweep-medium-grid)")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            study = optuna.load_study(study_name=study_name, storage=storage)
        except KeyError:
            names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
            raise ConfigError(f"no study {study_name!r} in {storage}; it holds {names}") from None
        return results_rows(study)
    if source is None:
        raise ConfigError("give a results.csv or --storage URL --study-name NAME")
    p = Path(source)
    if not p.is_file():
        raise ConfigError(
            f"results table {str(p)!r} does not exist; `perflab sweep run --out DIR` writes DIR/results.csv"
        )
    try:
        with p.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as exc:  # a binary file (a .db, a plot) named in the table's place
        raise ConfigError(f"{str(p)!r} is not a sweep results table (a CSV file): {exc}; `perflab sweep run --out "
                          "DIR` writes DIR/results.csv") from None  # fmt: skip
    needed = [k for k in PARAMS if k not in DEFAULTS]  # a table from before a knob existed ran its default
    missing = [c for c in (*needed, "status", "samples_per_s") if rows and c not in rows[0]]
    if not rows or missing:
        raise ConfigError(
            f"{str(p)!r} is not a sweep results table: {'no rows' if not rows else f'no column(s) {missing}'}"
        )
    out = []
    for r in rows:
        row: dict[str, Any] = {**r}
        for k in PARAMS:
            v = r.get(k)
            v = DEFAULTS.get(k) if v in (None, "") else v
            row[k] = int(str(v)) if k in _INTS else _bool(v)
        sps = r.get("samples_per_s")
        row["samples_per_s"] = float(sps) if sps not in (None, "") else None
        out.append(row)
    return out


_INTS = ("batch_size", "num_workers", "grad_accum", "prefetch_factor")


def grid_table(rows: Iterable[dict[str, Any]]) -> tuple[dict[str, list[Any]], dict[Key, Outcome], dict[str, int]]:
    """The search space, each configuration's measured outcome, and the configurations the grid ran by status.

    A configuration the grid skipped behind an OOM wall counts as ``oom`` (memory grows with the batch,
    the rule the sweep itself applies); a repeated or interrupted row yields to the measured one.
    """
    measured: dict[Key, Outcome] = {}
    walled: set[Key] = set()
    for r in rows:
        k = key(r)
        if r["status"] in MEASURED and k not in measured:
            v = r.get("samples_per_s")
            measured[k] = Outcome(r["status"], float(v) if r["status"] == "ok" and v is not None else None)
        elif r["status"] == "skipped" and "out of memory" in str(r.get("reason") or ""):
            walled.add(k)
    if not measured:
        raise ConfigError("the results table has no measured configuration (status ok/oom/failed/timeout)")
    keys = set(measured) | walled
    space = {name: sorted({k[i] for k in keys}) for i, name in enumerate(PARAMS)}
    missing = [key(p) for p in Space(space).points() if key(p) not in keys]
    if missing:
        shown = ", ".join(str(dict(zip(PARAMS, k, strict=True))) for k in missing[:3])
        raise ConfigError(
            f"a replay needs every configuration of the grid measured, but {len(missing)} of "
            f"{len(missing) + len(keys)} are not (e.g. {shown}); resume the grid sweep with the same "
            "--study-name and --storage to finish it"
        )
    table = {**{k: Outcome("oom", None) for k in walled - set(measured)}, **measured}
    statuses: dict[str, int] = {}  # what ran: the walled configurations' replayed "oom" is no measurement
    for o in measured.values():
        statuses[o.status] = statuses.get(o.status, 0) + 1
    return space, table, statuses


def _hit(outcome: Outcome, threshold: float | None) -> bool:
    return threshold is not None and outcome.status == "ok" and (outcome.samples_per_s or 0.0) >= threshold


def replay_smart(
    space: dict[str, list[Any]], table: dict[Key, Outcome], seed: int, stop_at: float | None = None
) -> list[tuple[dict[str, Any], Outcome]]:
    """The configurations a live ``--strategy smart`` sweep would run, in order, with their outcomes;
    up to the first with samples/s ≥ ``stop_at`` (None: until the strategy has nothing left)."""
    import optuna

    path: list[tuple[dict[str, Any], Outcome]] = []

    def evaluate(params: dict[str, Any], _: Pruner | None = None) -> TrialOutcome:
        o = table[key(params)]
        path.append((dict(params), o))
        return TrialOutcome(o.status, {"samples_per_s": o.samples_per_s} if o.status == "ok" else {})  # type: ignore[arg-type]

    def stop(study: optuna.Study, _: Any) -> None:
        if path and _hit(path[-1][1], stop_at):
            study.stop()

    storage = optuna.storages.InMemoryStorage()
    cfg = SweepConfig.from_space(space, seed)
    run_sweep(cfg, evaluate, "smart", storage=storage, study_name=f"replay-{seed}", callbacks=[stop], cuda=True)
    return path


def replay_random(
    space: dict[str, list[Any]], table: dict[Key, Outcome], seed: int, stop_at: float | None = None
) -> list[tuple[dict[str, Any], Outcome]]:
    """The baseline: the grid in a seeded random order; a configuration behind a wall already hit is skipped."""
    order = Space(space).points()
    random.Random(seed).shuffle(order)
    history: list[tuple[dict[str, Any], str, float | None]] = []
    path: list[tuple[dict[str, Any], Outcome]] = []
    for p in order:
        if blocked_by_wall(p, history) is not None:
            continue
        o = table[key(p)]
        history.append((p, o.status, o.samples_per_s))
        path.append((p, o))
        if _hit(o, stop_at):
            break
    return path


def _trials_to(path: Sequence[tuple[dict[str, Any], Outcome]], threshold: float) -> int | None:
    return next((i + 1 for i, (_, o) in enumerate(path) if _hit(o, threshold)), None)


def replay(rows: Iterable[dict[str, Any]], seeds: Sequence[int], within: float = 0.05, source: str = "") -> Replay:
    """Trials-to-target of smart and of a random order, per seed, against the grid's measurements."""
    if not 0 < within < 1:
        raise ConfigError(f"within must be a fraction in (0, 1), e.g. 0.05 for 5 %, but got {within=}")
    if not seeds:
        raise ConfigError("need at least one seed")
    space, table, statuses = grid_table(rows)
    ok = {k: o.samples_per_s for k, o in table.items() if o.status == "ok" and o.samples_per_s is not None}
    if not ok:
        raise ConfigError("no configuration of the grid finished ok: nothing to reach")
    best_key = max(ok, key=lambda k: ok[k])
    best = float(ok[best_key])  # type: ignore[arg-type]
    threshold = (1 - within) * best
    smart_paths = [replay_smart(space, table, s, stop_at=threshold) for s in seeds]
    return Replay(
        source=source, space=space, measured_trials=sum(statuses.values()), statuses=statuses, best=best,
        best_params=dict(zip(PARAMS, best_key, strict=True)), within=within,
        qualifying=sum(v >= threshold for v in ok.values()),  # type: ignore[operator]
        seeds=list(seeds), smart=[_trials_to(p, threshold) for p in smart_paths],
        random=[_trials_to(replay_random(space, table, s, stop_at=threshold), threshold) for s in seeds],
        smart_paths=smart_paths,
    )  # fmt: skip


def _median(counts: Sequence[int | None]) -> float | None:
    """Median trials; a seed that never reached the target counts as infinitely many."""
    m = statistics.median([float("inf") if c is None else float(c) for c in counts])
    return None if m == float("inf") else m


def _describe(p: dict[str, Any]) -> str:
    from sweeps.recommend import describe_config

    return describe_config(p)


def replay_markdown(r: Replay, target_frac: float = 0.15) -> str:
    pct = f"{100 * r.within:g} %"
    lines = [
        "# Smart vs grid: a replay against measured grid results",
        "",
        "Method: a **replay, not a new measurement**. Each strategy runs through the live sweep code (smart: "
        "`run_sweep` → `WallSampler` → `propose`, the path of `perflab sweep run --strategy smart`), but a trial "
        "looks the configuration up in the grid's results (its measured status and samples/s, OOMs included) "
        "instead of training. Each configuration has the grid's single measurement: run-to-run noise is not "
        "re-sampled. A configuration behind a known OOM wall is skipped without running, as in a live sweep; "
        "one the grid itself skipped behind a wall counts as an OOM.",
        "",
        f"- source: {r.source or '(rows)'}",
        f"- grid: {r.grid_size} configurations, {r.measured_trials} measured ("
        + ", ".join(f"{n} {s}" for s, n in sorted(r.statuses.items()))
        + ")"
        + (f", {r.skipped} skipped (a smaller batch ran out of memory)" if r.skipped else ""),
        f"- grid best: {r.best:.0f} samples/s ({_describe(r.best_params)}); within {pct}: ≥ {r.threshold:.0f} "
        f"samples/s, {r.qualifying} configuration(s) qualify",
        "",
        f"| seed | smart: trials to within {pct} | smart reached | random order: trials |",
        "|---:|---:|---|---:|",
    ]
    for seed, n, path, m in zip(r.seeds, r.smart, r.smart_paths, r.random, strict=True):
        reached = f"{path[n - 1][1].samples_per_s:.0f} samples/s ({_describe(path[n - 1][0])})" if n else "never"
        lines.append(f"| {seed} | {n or '—'} | {reached} | {m or '—'} |")
    ms, mr = _median(r.smart), _median(r.random)
    n = r.measured_trials
    lines.append("")
    if ms is None:
        lines.append(f"**smart**: the median seed never came within {pct} of the grid's best (target not met)")
    else:
        verdict = "met" if ms <= target_frac * n else "NOT met"
        lines.append(
            f"**smart**: median {ms:g} trials over {len(r.seeds)} seeds = {100 * ms / n:.1f} % of the grid's "
            f"{n} measured trials (target ≤ {100 * target_frac:g} %: {verdict}). The seed only breaks ties "
            "between equally near candidates once the ladder and the best's neighbourhood are measured, so "
            "seeds often agree."
        )
    k = r.qualifying
    lines.append(
        "\n**random order** (baseline): "
        + (f"median {mr:g} trials = {100 * mr / n:.1f} % of the grid's trials" if mr is not None else "median never")
        + f"; a uniformly random order needs (N+1)/(k+1) = {(r.grid_size + 1) / (k + 1):.1f} trials on average"
    )
    if r.smart_paths and r.smart_paths[0]:
        lines += ["", f"Smart's path, seed {r.seeds[0]}:", ""]
        for i, (p, o) in enumerate(r.smart_paths[0], 1):
            v = f" {o.samples_per_s:.0f} samples/s" if o.samples_per_s is not None else ""
            lines.append(f"{i}. {_describe(p)} → {o.status}{v}")
    return "\n".join(lines) + "\n"
