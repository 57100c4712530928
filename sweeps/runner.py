"""One sweep end to end: config → workload and data → study (isolated trials) → recommendation →
verification → MLflow (runs, tables, pictures)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from sweeps.config import DEFAULT_CONFIG, SweepConfig, load_sweep_config
from sweeps.outputs import overhead_summary, pictures, to_csv
from sweeps.recommend import Recommendation, Rules, recommend
from sweeps.space import PARAMS, usable_cores
from sweeps.trial import Pruner, TrialOutcome, run_trial, start_server
from sweeps.verify import Verification
from sweeps.workload import WorkloadSpec, parse_workload

__all__ = ["SweepResult", "evaluator", "job_for", "overhead_summary", "prober", "sweep", "to_csv"]

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
    conclusion: dict[str, Any] = field(default_factory=dict)  # what every worker on the study reports


def job_for(cfg: SweepConfig, spec: WorkloadSpec, data_path: str | None, cuda: bool, smoke: bool,
            params: dict[str, Any], **how: Any) -> Any:  # fmt: skip
    """The trial job of one configuration: the workload, its settings, how it is measured (``how``: the
    probe's fields of ``TrialJob``)."""
    from sweeps.api import TrialSettings
    from sweeps.measure import TrialJob

    settings = TrialSettings(
        **{k: params[k] for k in PARAMS}, device="cuda" if cuda else "cpu", amp_dtype=cfg.amp_dtype, seed=cfg.seed,
        learning_rate=cfg.learning_rate, data_path=data_path, smoke=smoke, args=dict(cfg.workload_args),
    )  # fmt: skip
    return TrialJob(
        workload=asdict(spec), settings=asdict(settings), steps=cfg.steps_per_test, warmup_steps=cfg.warmup_steps,
        max_memory_gb=cfg.max_memory_gb, prune_after_steps=cfg.prune_after_steps, **how,
    )  # fmt: skip


def prober(
    cfg: SweepConfig, spec: WorkloadSpec, data_path: str | None, cuda: bool, smoke: bool
) -> Callable[[dict[str, Any]], TrialOutcome]:
    """The bottleneck probe of one configuration (``sweeps.probe``), in a fresh trial process."""
    from sweeps.conclude import probe_workers

    def run(params: dict[str, Any]) -> TrialOutcome:
        job = job_for(cfg, spec, data_path, cuda, smoke, params, mode="probe",
                      probe_workers=probe_workers(params["num_workers"]), probe_seconds=cfg.probe_seconds)  # fmt: skip
        return run_trial(job, cfg.trial_timeout_s * 2)

    return run


def evaluator(
    cfg: SweepConfig, spec: WorkloadSpec, data_path: str | None, cuda: bool, smoke: bool
) -> Callable[[dict[str, Any], Pruner | None], TrialOutcome]:
    def evaluate(params: dict[str, Any], should_prune: Pruner | None = None, min_seconds: float = 0.0) -> TrialOutcome:
        job = job_for(cfg, spec, data_path, cuda, smoke, params, min_seconds=min_seconds)
        return run_trial(job, cfg.trial_timeout_s, should_prune=should_prune)

    return evaluate


def rules_of(cfg: SweepConfig) -> Rules:
    return Rules(
        max_memory_pct=cfg.max_memory_pct, min_gpu_util_pct=cfg.min_gpu_util_pct,
        host_bound_util_pct=cfg.host_bound_util_pct, learning_rate=cfg.learning_rate,
        reference_batch_size=cfg.reference_batch_size, amp_dtype=cfg.amp_dtype, usable_cores=usable_cores(),
    )  # fmt: skip


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
        _write_once(Path(data_path), lambda p: make(p, seed=seed, **_DATA_SIZES[(kind, smoke)]), echo)
    return check(data_path).path


def _write_once(path: Path, make: Callable[[Path], Any], echo: Callable[[str], None]) -> None:
    """Write ``path`` unless it exists; sweeps started together in one directory write it once: the first
    holds a lock while it writes a temporary file and renames it, the others wait and find it whole
    (HDF5 refuses to open a file another process is writing)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return
        echo(f"no --data-path: writing synthetic data to {path} (once)")
        t0 = time.monotonic()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        make(tmp)
        os.replace(tmp, path)
        echo(f"  written in {time.monotonic() - t0:.1f} s")


def _resolve_device(device: str) -> bool:
    import torch

    available = bool(torch.cuda.is_available())
    if device == "cuda" and not available:
        raise ConfigError("--device cuda, but torch sees no CUDA device (use --device auto or cpu)")
    return device == "cuda" or (device == "auto" and available)


def _study_name(spec: WorkloadSpec, strategy: str) -> str:
    short = spec.target if spec.builtin else f"{Path(spec.target).stem if spec.kind == 'file' else spec.target}"
    return f"perflab-sweep-{re.sub(r'[^A-Za-z0-9_.-]+', '-', short)}-{strategy}"


def _steps(show: bool, what: str, total: int) -> Any:
    """The command's progress over the configurations (``bench.cli.progress``), or none (``report`` echoes)."""
    if not show:
        return contextlib.nullcontext(None)
    from bench.cli import progress

    return progress(what, total)


@dataclass
class _Sweep:
    """What every step of one sweep needs: the configuration resolved, the workload, data and device."""

    cfg: SweepConfig
    spec: WorkloadSpec
    cuda: bool
    smoke: bool
    data: str | None
    name: str
    strategy: str
    echo: Callable[[str], None]
    tracker: Any = None

    @property
    def device(self) -> str:
        return "cuda" if self.cuda else "cpu"

    def fingerprint(self) -> dict[str, Any]:
        from sweeps.storage import data_digest

        cfg = self.cfg
        return {
            "workload": self.spec.text, "workload_target": self.spec.target, "data": data_digest(self.data),
            "space": cfg.space(self.cuda).values, "steps": [cfg.warmup_steps, cfg.steps_per_test],
            "device": self.device, "size": "smoke" if self.smoke else "full", "amp_dtype": cfg.amp_dtype,
            "workload_args": cfg.workload_args, "max_memory_gb": cfg.max_memory_gb,
        }  # fmt: skip


def _prepare(config: str | Path | None, data_path: str | Path | None, strategy: str, study_name: str | None,
             overrides: dict[str, Any], echo: Callable[[str], None]) -> _Sweep:  # fmt: skip
    cfg = load_sweep_config(_config_file(config, overrides), **overrides)
    if note := cfg.left_out():
        echo(note)
    cores = usable_cores()
    if over := sorted({w for w in [*cfg.num_workers_options, cfg.baseline.get("num_workers", 0)] if w > cores}):
        echo(f"warning: num_workers {', '.join(map(str, over))}: more DataLoader workers than this host's {cores} "
             "usable cores; they will share cores (measured all the same)")  # fmt: skip
    spec = parse_workload(cfg.workload)
    cuda = _resolve_device(cfg.device)
    smoke = cfg.size == "smoke" or (cfg.size == "auto" and not cuda)
    data = _data(spec, data_path, smoke, cfg.seed, echo)
    return _Sweep(cfg, spec, cuda, smoke, data, study_name or _study_name(spec, strategy), strategy, echo)


def _track(sw: _Sweep, baseline: dict[str, Any], experiment: str | None) -> Any:
    from sweeps.recommend import describe_config
    from sweeps.tracking import SweepTracker

    config = {k: v for k, v in sw.cfg.model_dump().items() if k != "baseline"}
    params = {**config, "baseline": describe_config(baseline),
              "strategy": sw.strategy, "study_name": sw.name, "data_path": sw.data, "device_kind": sw.device,
              "size": "smoke" if sw.smoke else "full"}  # fmt: skip
    return SweepTracker(f"sweep {sw.name}", params, experiment=experiment)


def _reporter(sw: _Sweep, step: Callable[[], Any]) -> Callable[[Any, Any], None]:
    """The line each finished trial prints (and its MLflow run)."""
    from bench.cli import console, wrapped
    from sweeps.recommend import describe_config
    from sweeps.search import MARKERS, MEASURED, config_of
    from sweeps.study import measured_count

    before: list[int | None] = [None]  # configurations the study held when this sweep's first trial ended

    def report(study: Any, trial: Any) -> None:
        a, c = trial.user_attrs, config_of(trial)
        if a.get("status") == "skipped" and a.get("reason") in MARKERS:
            return
        sps = a.get("metrics", {}).get("samples_per_s")
        reason = f" ({a['reason']})" if a.get("status") in ("skipped", "pruned") and a.get("reason") else ""
        if a.get("status") in ("failed", "timeout", "oom", "pruned") and a.get("error"):  # a pruned trial's: its rule
            reason = f": {a['error'].splitlines()[0][:300]}"  # why, in the trial's own line
        line = (f"trial {trial.number}: {describe_config(c) if c else '?'} -> {a.get('status')}"
                + (f" {sps:.0f} samples/s" if sps else "") + reason)  # fmt: skip
        shown = step()
        if shown is not None:
            measured = int(a.get("status") in MEASURED)  # a step: a configuration measured
            if before[0] is None:  # a resumed (or shared) study counts from what it already holds
                before[0] = max(measured_count(study) - measured, 0)
                measured += before[0]
            shown(wrapped(line, console.width - 8, hang=8), advance=measured)  # under its text, past "  3/16 "
        else:
            sw.echo(line)
        if sw.tracker is not None:
            sw.tracker.log_trial(trial)

    return report


def _run_trials(sw: _Sweep, run: Any, n_trials: int | None, storage: str | None, resume: bool,
                progress: bool) -> Any:  # fmt: skip
    from sweeps.study import run_sweep

    bar: list[Any] = [None]  # the progress's step function while the trials run (progress=True)
    total = n_trials or sw.cfg.space(sw.cuda).size()
    with _steps(progress, f"sweep {sw.name}: configurations", total) as bar[0]:
        study = run_sweep(
            sw.cfg, run, sw.strategy, n_trials, storage, sw.name, callbacks=[_reporter(sw, lambda: bar[0])],
            cuda=sw.cuda, fingerprint=sw.fingerprint(), resume=resume, echo=sw.echo,
        )  # fmt: skip
    return study


def _time_budget_note(sw: _Sweep, rows: list[dict[str, Any]]) -> None:
    space = sw.cfg.space(sw.cuda)
    seen = {tuple(r[k] for k in PARAMS) for r in rows}
    if sw.strategy == "grid" and sw.cfg.time_budget_s is not None and len(seen) < space.size():
        sw.echo(f"time budget of {sw.cfg.time_budget_s:g} s reached: {len(seen)} of {space.size()} configurations "
                f"done; the same --storage and --study-name {sw.name!r} resume the rest")  # fmt: skip


def _conclusion(sw: _Sweep, study: Any, rows: list[dict[str, Any]], run: Any, probe: Any, baseline: dict[str, Any],
                overhead_line: str, target: int) -> tuple[Recommendation, dict[str, Any], Any]:  # fmt: skip
    """The study's conclusion at ``target`` configurations (the study's --n-trials: every worker claims the
    same one), computed here or by the worker that claimed it (``sweeps.final``): the recommendation, the
    published conclusion, and this worker's verification (None if not its)."""
    from sweeps.conclude import conclude
    from sweeps.final import conclude_once

    rules = rules_of(sw.cfg)
    rec = recommend(rows, sw.device, rules, workload=sw.spec.text)
    mine: list[Any] = []

    seconds = sw.cfg.remeasure_seconds  # an evaluate= of the caller's own need not take it when 0

    def again(params: dict[str, Any]) -> Any:
        return run(params, None, min_seconds=seconds) if seconds else run(params, None)

    def compute() -> dict[str, Any]:
        c = conclude(sw.cfg, rec, again, probe, baseline, sw.echo)
        mine.append(c)
        return c.published(overhead_line, rules)

    cfg = sw.cfg
    wait = cfg.trial_timeout_s * (cfg.rank_top * cfg.rank_rounds + 2 * cfg.verify_repeats + 3)
    storage = getattr(study._storage, "_backend", study._storage)
    published, here = conclude_once(study, storage, target, compute, sw.echo, wait)
    if not here:
        rec.recommended = published["recommended"]
    return rec, published, mine[0].verification if mine else None


def _files(sw: _Sweep, study: Any, rows: list[dict[str, Any]], rec: Recommendation,
           published: dict[str, Any], out: Path | None) -> dict[str, str | bytes]:  # fmt: skip
    numbers = {k: v for k, v in published.items() if k not in ("markdown", "snippet")}
    files: dict[str, str | bytes] = {"results.csv": to_csv(rec.diagnoses), "recommendation.md": published["markdown"],
                                     "recommendation.yaml": published["snippet"],
                                     "conclusion.json": json.dumps(numbers, indent=1)}  # fmt: skip
    title = sw.spec.text if len(sw.spec.text) < 40 else "..." + sw.spec.text[-37:]
    chosen_trial = rec.recommended.get("trial") if rec.recommended else None
    files.update(pictures(study, rows, sw.cfg.space(sw.cuda).varied(), title, chosen_trial))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for fname, content in files.items():
            (out / fname).write_bytes(content if isinstance(content, bytes) else content.encode())
    return files


def _log(sw: _Sweep, rows: list[dict[str, Any]], rec: Recommendation, published: dict[str, Any],
         verification: Verification | None, metrics: dict[str, float],
         files: dict[str, str | bytes]) -> str:  # fmt: skip
    tracker = sw.tracker
    if verification is not None:
        for side in (verification.baseline, verification.recommended):
            tracker.log_verified(side)
    metrics = {"n_trials": float(len(rows)), "n_ok": float(sum(r["status"] == "ok" for r in rows)), **metrics}
    if rec.highest_throughput:
        metrics["best_samples_per_s"] = rec.highest_throughput["samples_per_s"]
    names = ("verified_speedup", "verified_speedup_ci_low", "verified_speedup_ci_high")
    metrics.update({k: x for k, x in zip(names, published.get("speedup") or (), strict=False) if x is not None})
    metrics.update({f"bottleneck_{k}": v for k, v in (published.get("bottleneck") or {}).items()})
    tracker.finish(metrics, files)
    sw.echo(f"logged to MLflow parent run {tracker.parent}")
    return str(tracker.parent)


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
    """Measure the configurations (the study), then conclude once per study: recommend, rank, probe the
    bottleneck, verify against the baseline; print, write and log it. ``evaluate`` replaces the trial
    processes (tests); the bottleneck probe then does not run."""
    from sweeps.search import results_rows
    from sweeps.storage import check_storage_url
    from sweeps.study import settle

    if storage:
        check_storage_url(storage)  # before the data is made and the trial server started
    sw = _prepare(config, data_path, strategy, study_name, dict(overrides or {}), echo)
    baseline = sw.cfg.baseline_params(sw.cuda)
    sw.tracker = _track(sw, baseline, experiment) if track else None
    t0 = time.monotonic()
    server: dict[str, float] = {}
    run = evaluate or evaluator(sw.cfg, sw.spec, sw.data, sw.cuda, sw.smoke)
    if evaluate is None:
        # the imports, once: not part of any trial's overhead (a user's module too, when importable by name)
        server["server_start_s"] = start_server([sw.spec.target] if sw.spec.kind == "module" else [])
        echo(f"trial server (forkserver) ready in {server['server_start_s']:.2f} s")
    probe = prober(sw.cfg, sw.spec, sw.data, sw.cuda, sw.smoke) if evaluate is None else None
    ok = interrupted = False
    try:
        study = _run_trials(sw, run, n_trials, storage, resume, progress)
        target = n_trials or sw.cfg.space(sw.cuda).size()
        settle(study, sw.cfg, target)  # other workers' trials: the table is whole before anyone concludes
        rows = results_rows(study)
        sweep_wall = time.monotonic() - t0
        trials = f"{len(rows)} trial{'s' * (len(rows) != 1)}"
        echo(f"sweep: {trials} finished in {sweep_wall:.1f} s ({strategy}, study {sw.name!r})")
        _time_budget_note(sw, rows)
        overhead_line, overhead_metrics = overhead_summary(rows)
        rec, published, verification = _conclusion(sw, study, rows, run, probe, baseline, overhead_line, target)
        echo(published["markdown"])
        echo(published["snippet"])
        files = _files(sw, study, rows, rec, published, out)
        parent = None
        if sw.tracker is not None:
            metrics = {"sweep_wall_s": sweep_wall, **server, **overhead_metrics}
            parent = _log(sw, rows, rec, published, verification, metrics, files)
        ok = True
        return SweepResult(rec, rows, verification, sw.name, parent, published)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP (perflab's main): the study keeps every finished trial
        interrupted = True
        echo(f"interrupted; the same --storage and --study-name {sw.name!r} resume the sweep")
        raise
    finally:
        if sw.tracker is not None and not ok:
            sw.tracker.finish({}, {}, ok=False, interrupted=interrupted)
