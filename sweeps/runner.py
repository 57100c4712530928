"""One sweep end to end: config → workload and data → study (isolated trials) → recommendation →
verification → MLflow (runs, tables, pictures)."""

from __future__ import annotations

import contextlib
import csv
import io
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from sweeps.config import DEFAULT_CONFIG, SweepConfig, load_sweep_config
from sweeps.recommend import Recommendation, Rules, recommend, snippet_yaml, table_markdown
from sweeps.space import PARAMS
from sweeps.trial import PRELOAD, Pruner, TrialOutcome, run_trial, start_server
from sweeps.verify import Verification, verification_markdown, verify
from sweeps.workload import WorkloadSpec, parse_workload

__all__ = ["SweepResult", "evaluator", "overhead_summary", "sweep"]

# Built-in data written once per layout and size (seconds to make), under the results directory.
_DATA_SIZES = {("features", True): {"samples": 20_000}, ("features", False): {},
               ("images", True): {"samples": 256, "size": 40}, ("images", False): {}}  # fmt: skip


@dataclass
class SweepResult:
    recommendation: Recommendation
    rows: list[dict[str, Any]]
    verification: Verification | None
    study_name: str
    parent_run_id: str | None


def job_for(cfg: SweepConfig, spec: WorkloadSpec, data_path: str | None, cuda: bool, smoke: bool,
            params: dict[str, Any]) -> Any:  # fmt: skip
    """The trial job of one configuration: the workload, its settings, how it is measured."""
    from sweeps.api import TrialSettings
    from sweeps.measure import TrialJob

    settings = TrialSettings(
        **{k: params[k] for k in PARAMS}, device="cuda" if cuda else "cpu", amp_dtype=cfg.amp_dtype, seed=cfg.seed,
        learning_rate=cfg.learning_rate, data_path=data_path, smoke=smoke, args=dict(cfg.workload_args),
    )  # fmt: skip
    return TrialJob(
        workload=asdict(spec), settings=asdict(settings), steps=cfg.steps_per_test, warmup_steps=cfg.warmup_steps,
        max_memory_gb=cfg.max_memory_gb, prune_after_steps=cfg.prune_after_steps,
    )  # fmt: skip


def evaluator(
    cfg: SweepConfig, spec: WorkloadSpec, data_path: str | None, cuda: bool, smoke: bool
) -> Callable[[dict[str, Any], Pruner | None], TrialOutcome]:
    def evaluate(params: dict[str, Any], should_prune: Pruner | None = None) -> TrialOutcome:
        job = job_for(cfg, spec, data_path, cuda, smoke, params)
        return run_trial(job, cfg.trial_timeout_s, should_prune=should_prune)

    return evaluate


def rules_of(cfg: SweepConfig) -> Rules:
    return Rules(
        max_memory_pct=cfg.max_memory_pct, min_gpu_util_pct=cfg.min_gpu_util_pct,
        host_bound_util_pct=cfg.host_bound_util_pct, learning_rate=cfg.learning_rate,
        reference_batch_size=cfg.reference_batch_size, amp_dtype=cfg.amp_dtype,
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


def _config_file(config: str | Path | None, overrides: dict[str, Any]) -> str | Path | None:
    """No --config: a built-in workload's own search space (cnn.yaml, gpt.yaml), else default.yaml's."""
    if config is not None:
        return config
    from sweeps.builtins import BUILTINS

    name = overrides.get("workload") or overrides.get("preset")
    builtin = BUILTINS.get(name) if name else None
    return DEFAULT_CONFIG.with_name(builtin.config) if builtin and builtin.config else DEFAULT_CONFIG


def _data(
    spec: WorkloadSpec, data_path: str | Path | None, smoke: bool, seed: int, echo: Callable[[str], None]
) -> str | None:
    """The data file a trial reads: the user's, or the built-in's own (written once, then reused)."""
    from sweeps import data
    from sweeps.builtins import BUILTINS
    from sweeps.storage import results_dir

    kind = BUILTINS[spec.target].data if spec.builtin else None
    if kind is None:
        return str(data_path) if data_path is not None else None
    check, make = (data.check_data, data.make_data) if kind == "features" else (data.check_images, data.make_images)
    if data_path is None:
        data_path = results_dir() / "data" / f"{kind}-{'smoke' if smoke else 'full'}.h5"
        if not Path(data_path).exists():
            echo(f"no --data-path: writing synthetic {kind} data to {data_path} (once)")
            t0 = time.monotonic()
            make(data_path, seed=seed, **_DATA_SIZES[(kind, smoke)])
            echo(f"  written in {time.monotonic() - t0:.1f} s")
    return check(data_path).path


def _resolve_device(device: str) -> bool:
    import torch

    available = bool(torch.cuda.is_available())
    if device == "cuda" and not available:
        raise ConfigError("--device cuda, but torch sees no CUDA device (use --device auto or cpu)")
    return device == "cuda" or (device == "auto" and available)


def _study_name(spec: WorkloadSpec, strategy: str) -> str:
    short = spec.target if spec.builtin else f"{Path(spec.target).stem if spec.kind == 'file' else spec.target}"
    return f"perflab-sweep-{re.sub(r'[^A-Za-z0-9_.-]+', '-', short)}-{strategy}"


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


def _steps(show: bool, what: str, total: int) -> Any:
    """The command's progress over the configurations (``bench.cli.progress``), or none (``report`` echoes)."""
    if not show:
        return contextlib.nullcontext(None)
    from bench.cli import progress

    return progress(what, total)


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
    evaluate: Callable[[dict[str, Any], Pruner | None], TrialOutcome] | None = None,
    resume: bool = False,
    progress: bool = False,
) -> SweepResult:
    from sweeps.recommend import describe_config
    from sweeps.search import results_rows, run_sweep
    from sweeps.storage import check_storage_url, data_digest

    if storage:
        check_storage_url(storage)  # before the data is made and the trial server started
    overrides = dict(overrides or {})
    cfg = load_sweep_config(_config_file(config, overrides), **overrides)
    spec = parse_workload(cfg.workload)
    cuda = _resolve_device(cfg.device)
    smoke = cfg.size == "smoke" or (cfg.size == "auto" and not cuda)
    data = _data(spec, data_path, smoke, cfg.seed, echo)
    space = cfg.space(cuda)
    name = study_name or _study_name(spec, strategy)
    fingerprint = {
        "workload": spec.text, "workload_target": spec.target, "data": data_digest(data), "space": space.values,
        "steps": [cfg.warmup_steps, cfg.steps_per_test], "device": "cuda" if cuda else "cpu",
        "size": "smoke" if smoke else "full", "amp_dtype": cfg.amp_dtype, "workload_args": cfg.workload_args,
        "max_memory_gb": cfg.max_memory_gb,
    }  # fmt: skip
    baseline = cfg.baseline_params(cuda)
    tracker = None
    if track:
        from sweeps.tracking import SweepTracker

        tracker = SweepTracker(
            f"sweep {name}",
            {**{k: v for k, v in cfg.model_dump().items() if k != "baseline"}, "baseline": describe_config(baseline),
             "strategy": strategy, "study_name": name, "data_path": data, "device_kind": "cuda" if cuda else "cpu",
             "size": "smoke" if smoke else "full"},
            experiment=experiment,
        )  # fmt: skip

    step: Callable[..., None] | None = None  # the progress's, while the trials run (progress=True)

    def report(study: Any, trial: Any) -> None:
        from sweeps.search import MEASURED, config_of

        a, c = trial.user_attrs, config_of(trial)
        if a.get("status") == "skipped" and a.get("reason") == "nothing left to measure":
            return
        sps = a.get("metrics", {}).get("samples_per_s")
        reason = f" ({a['reason']})" if a.get("status") in ("skipped", "pruned") and a.get("reason") else ""
        line = (f"trial {trial.number}: {describe_config(c) if c else '?'} -> {a.get('status')}"
                + (f" {sps:.0f} samples/s" if sps else "") + reason)  # fmt: skip
        if step is not None:
            step(line, advance=int(a.get("status") in MEASURED))  # a step: a configuration measured
        else:
            echo(line)
        if tracker is not None:
            tracker.log_trial(trial)

    t0 = time.monotonic()
    server: dict[str, float] = {}
    run = evaluate or evaluator(cfg, spec, data, cuda, smoke)
    if evaluate is None:
        # the imports, once: not part of any trial's overhead (a user's module too, when importable by name)
        server["server_start_s"] = start_server([spec.target] if spec.kind == "module" else [])
        echo(f"trial server (forkserver) ready in {server['server_start_s']:.2f} s")
    ok = interrupted = False
    try:
        with _steps(progress, f"sweep {name}: configurations", n_trials or space.size()) as step:
            study = run_sweep(
                cfg, run, strategy, n_trials, storage, name, callbacks=[report], cuda=cuda, fingerprint=fingerprint,
                resume=resume, echo=echo,
            )  # fmt: skip
        step = None
        rows = results_rows(study)
        sweep_wall = time.monotonic() - t0
        echo(f"sweep: {len(rows)} trials finished in {sweep_wall:.1f} s ({strategy}, study {name!r})")
        seen = {tuple(r[k] for k in PARAMS) for r in rows}
        if strategy == "grid" and cfg.time_budget_s is not None and len(seen) < space.size():
            echo(
                f"time budget of {cfg.time_budget_s:g} s reached: {len(seen)} of {space.size()} configurations "
                f"done; the same --storage and --study-name {name!r} resume the rest"
            )
        rules = rules_of(cfg)
        rec = recommend(rows, "cuda" if cuda else "cpu", rules, workload=spec.text)
        overhead_line, overhead_metrics = overhead_summary(rows)
        md = table_markdown(rec) + f"\n\n_{overhead_line}_"
        verification = None
        if cfg.verify_repeats and rec.recommended is not None:
            chosen = {k: rec.recommended[k] for k in PARAMS}
            echo(f"verifying: recommended vs baseline, {cfg.verify_repeats} fresh runs each")
            verification = verify(lambda p: run(p, None), chosen, baseline, cfg.verify_repeats, echo, cfg.seed)
            md += "\n\n" + verification_markdown(verification)
        elif cfg.verify_repeats:
            md += "\n\n_Verification skipped: nothing was recommended._"
        snippet = snippet_yaml(rec, rules)
        echo(md)
        echo(snippet)
        files: dict[str, str | bytes] = {"results.csv": to_csv(rec.diagnoses), "recommendation.md": md,
                                         "recommendation.yaml": snippet}  # fmt: skip
        title = spec.text if len(spec.text) < 40 else "..." + spec.text[-37:]
        chosen_trial = rec.recommended.get("trial") if rec.recommended else None
        files.update(pictures(study, rows, space.varied(), title, chosen_trial))
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for fname, content in files.items():
                (out / fname).write_bytes(content if isinstance(content, bytes) else content.encode())
        parent = None
        if tracker is not None:
            if verification is not None:
                for side in (verification.baseline, verification.recommended):
                    tracker.log_verified(side)
            best = rec.highest_throughput
            metrics = {"n_trials": float(len(rows)), "n_ok": float(sum(r["status"] == "ok" for r in rows)),
                       "sweep_wall_s": sweep_wall, **server, **overhead_metrics}  # fmt: skip
            if best:
                metrics["best_samples_per_s"] = best["samples_per_s"]
            if verification is not None:
                v = verification
                metrics.update({k: x for k, x in (("verified_speedup", v.speedup), ("verified_speedup_ci_low", v.low),
                                                  ("verified_speedup_ci_high", v.high)) if x is not None})  # fmt: skip
            tracker.finish(metrics, files)
            parent = tracker.parent
            echo(f"logged to MLflow parent run {parent}")
        ok = True
        return SweepResult(rec, rows, verification, name, parent)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP (perflab's main): the study keeps every finished trial
        interrupted = True
        echo(f"interrupted; the same --storage and --study-name {name!r} resume the sweep")
        raise
    finally:
        if tracker is not None and not ok:
            tracker.finish({}, {}, ok=False, interrupted=interrupted)
