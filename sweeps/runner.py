"""One sweep end to end: config → data → study (isolated trials) → MLflow → recommendation."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeps.config import SweepConfig, load_sweep_config
from sweeps.recommend import Recommendation, Rules, recommend, snippet_yaml, table_markdown
from sweeps.trial import TrialOutcome, run_trial
from sweeps.workload import TrialJob

__all__ = ["evaluator", "sweep"]

DEFAULT_DATA = Path("perflab-sweep-data.h5")


def evaluator(cfg: SweepConfig, data_path: str) -> Callable[[dict[str, Any]], TrialOutcome]:
    def evaluate(params: dict[str, Any]) -> TrialOutcome:
        job = TrialJob(
            data_path=data_path, preset=cfg.preset, steps=cfg.steps_per_test, warmup_steps=cfg.warmup_steps,
            device=cfg.device, max_memory_gb=cfg.max_memory_gb, learning_rate=cfg.learning_rate, seed=cfg.seed,
            **params,
        )  # fmt: skip
        return run_trial(job, cfg.trial_timeout_s)

    return evaluate


def rules_of(cfg: SweepConfig) -> Rules:
    return Rules(
        max_memory_pct=cfg.max_memory_pct, min_gpu_util_pct=cfg.min_gpu_util_pct,
        learning_rate=cfg.learning_rate, reference_batch_size=cfg.reference_batch_size,
    )  # fmt: skip


def to_csv(rows: list[dict[str, Any]]) -> str:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def sweep(
    config: str | Path | None = None,
    data_path: str | Path | None = None,
    strategy: str = "grid",
    n_trials: int | None = None,
    storage: str | None = None,
    study_name: str | None = None,
    out: Path | None = None,
    experiment: str | None = None,
    track: bool = True,
    echo: Callable[[str], None] = print,
    overrides: dict[str, Any] | None = None,
    evaluate: Callable[[dict[str, Any]], TrialOutcome] | None = None,
) -> tuple[Recommendation, list[dict[str, Any]]]:
    from sweeps.data import check_data, make_data
    from sweeps.search import results_rows, run_sweep

    cfg = load_sweep_config(config, **(overrides or {}))
    if data_path is None:
        data_path = DEFAULT_DATA
        if not data_path.exists():
            echo(f"no --data-path: writing synthetic data to {data_path}")
            make_data(data_path, seed=cfg.seed)
    info = check_data(data_path)
    name = study_name or f"perflab-sweep-{cfg.preset}-{strategy}"
    tracker = None
    if track:
        from sweeps.tracking import SweepTracker

        tracker = SweepTracker(
            f"sweep {name}",
            {**cfg.model_dump(), "strategy": strategy, "study_name": name, "data_path": info.path,
             "data_samples": info.samples},
        )  # fmt: skip

    def report(study: Any, trial: Any) -> None:
        p, a = trial.params, trial.user_attrs
        sps = a.get("metrics", {}).get("samples_per_s")
        echo(
            f"trial {trial.number}: bs={p.get('batch_size')} workers={p.get('num_workers')} amp={p.get('amp')} "
            f"pin={p.get('pin_memory')} -> {a.get('status')}" + (f" {sps:.0f} samples/s" if sps else "")
        )
        if tracker is not None:
            tracker.log_trial(trial)

    ok = False
    try:
        study = run_sweep(
            cfg, evaluate or evaluator(cfg, info.path), strategy, n_trials, storage, name, callbacks=[report]
        )
        ok = True
    finally:
        if tracker is not None and not ok:
            tracker.finish({}, {}, ok=False)
    rows = results_rows(study)
    device = "cpu" if cfg.device == "cpu" or not _cuda() else "cuda"
    rules = rules_of(cfg)
    rec = recommend(rows, device, rules)
    md, snippet = table_markdown(rec), snippet_yaml(rec, rules)
    echo(md)
    echo(snippet)
    files = {"results.csv": to_csv([{k: v for k, v in r.items()} for r in rec.diagnoses]),
             "recommendation.md": md, "recommendation.yaml": snippet}  # fmt: skip
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for fname, text in files.items():
            (out / fname).write_text(text)
    if tracker is not None:
        best = rec.highest_throughput
        metrics = {"n_trials": float(len(rows)), "n_ok": float(sum(r["status"] == "ok" for r in rows))}
        if best:
            metrics["best_samples_per_s"] = best["samples_per_s"]
        tracker.finish(metrics, files)
        echo(f"logged to MLflow parent run {tracker.parent}")
    return rec, rows


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
