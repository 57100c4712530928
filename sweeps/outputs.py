"""A sweep's outputs beside its recommendation: the results table as CSV, the measurement overhead, the
pictures (history, knob importances, Pareto front, batch size per worker count)."""

from __future__ import annotations

import csv
import io
import statistics
from typing import Any

from sweeps.trial import PRELOAD

__all__ = ["overhead_summary", "pictures", "to_csv"]


def to_csv(rows: list[dict[str, Any]]) -> str:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def overhead_summary(rows: list[dict[str, Any]], target_s: float = 1.0) -> tuple[str, dict[str, float]]:
    """What a trial costs beyond its warm-up and measured steps (ok trials): a printable line and the
    parent run's metrics (empty when no trial recorded the split)."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("overhead_s") is not None]
    if not ok:
        return "measurement overhead: no ok trial recorded it", {}
    keys = ("overhead_s", "startup_s", "setup_s", "teardown_s", "steps_time_s", "trial_wall_s")
    med = {k: statistics.median(float(r[k]) for r in ok) for k in keys}
    worst = max(float(r["overhead_s"]) for r in ok)
    line = (
        f"measurement overhead beyond the training steps (fast path: forkserver, {', '.join(PRELOAD[:3])} "
        f"preloaded), {len(ok)} ok trials: median {med['overhead_s']:.3f} s, max {worst:.3f} s "
        f"(target <= {target_s:g} s: {'met' if med['overhead_s'] <= target_s else 'NOT met'}); median split: "
        f"startup {med['startup_s']:.3f} s, setup {med['setup_s']:.3f} s, teardown {med['teardown_s']:.3f} s; "
        f"median steps {med['steps_time_s']:.3f} s of a {med['trial_wall_s']:.3f} s trial"
    )
    metrics = {f"median_{k}": v for k, v in med.items()} | {"max_overhead_s": worst}
    return line, metrics


def _importances(study: Any, varied: list[str]) -> tuple[dict[str, float] | None, str]:
    import optuna
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not varied:
        return None, "every knob had one value: nothing to rank"
    if len(done) < 3:
        return None, f"{len(done)} completed trial(s): too few to rank the knobs"
    try:
        # fANOVA: the share of the throughput's variance each knob explains (direction-free, unlike
        # Optuna 5's default PED-ANOVA, which ranks knobs for reaching *low* values of a custom target)
        imp = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0), params=varied,
            target=lambda t: t.values[0],
        )  # fmt: skip
        return {k: float(v) for k, v in imp.items()}, ""
    except Exception as exc:  # e.g. a knob that every completed trial set alike
        return None, f"not computed: {type(exc).__name__}: {exc}"


def pictures(study: Any, rows: list[dict[str, Any]], varied: list[str], title: str,
             recommended: int | None) -> dict[str, bytes]:  # fmt: skip
    """The parent run's PNGs: optimization history, importances, Pareto front, batch size per workers."""
    from sweeps import plots

    importances, why = _importances(study, varied)
    return {
        "history.png": plots.history_png(rows, title),
        "importance.png": plots.importance_png(importances, title, why),
        "pareto.png": plots.pareto_png(rows, title, recommended),
        "batch_size.png": plots.batch_png(rows, title),
    }
