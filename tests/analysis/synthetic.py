"""Builders of synthetic MLflow histories: VariantResults logged through bench.record.tracking.Tracker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mlflow import MlflowClient

from bench.define.result import (
    Comparison,
    ErrorInfo,
    Memory,
    StageRecord,
    Timing,
    VariantResult,
    VariantSpec,
    Verification,
    Work,
)
from bench.measure.stats import summarize
from bench.record.tracking import Tracker

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


@dataclass(frozen=True)
class Store:
    uri: str
    root: Path
    client: MlflowClient

    def experiment(self, name: str) -> str:
        """Create an experiment whose artifacts live under the temp root (never ./mlruns)."""
        return self.client.create_experiment(name, artifact_location=(self.root / "artifacts" / name).as_uri())


def draw(median: float, seed: int, n: int = 50, sigma: float = 0.02) -> list[float]:
    """Log-normal timing samples whose population median is ``median`` (ms)."""
    rng = np.random.default_rng(seed)
    return (median * np.exp(sigma * rng.standard_normal(n))).tolist()


def result(
    key: str,
    samples: Sequence[float] | None,
    *,
    gpu: str | None = H100,
    torch: str = "2.11.0",
    triton: str | None = "3.5.0",
    status: str = "ok",
    work_bytes: float | None = None,
    work_flops: float | None = None,
    ceiling: tuple[str, float, float] | None = None,
) -> VariantResult:
    """A variant result for ``chapter:example:variant``; ``samples=None`` for one that measured nothing;
    ``ceiling``: a stated ceiling (name, ms, target %) beside the declared work."""
    chapter, example, variant = key.split(":")
    device = "cuda:0" if gpu else "cpu"
    manifest: dict = {"device": device, "torch": torch, "triton": triton}
    if gpu:
        manifest["gpu"] = {"name": gpu}
    timing = None
    if samples is not None:
        timing = Timing(
            mode="cuda_event" if gpu else "cpu", method="synthetic", samples_ms=list(samples), stats=summarize(samples)
        )
    failed = status != "ok"
    return VariantResult(
        spec=VariantSpec(chapter=chapter, example=example, variant=variant, path=f"/x/{variant}_{example}.py"),
        status=status,  # type: ignore[arg-type]
        failed_stage="measurement" if failed else None,
        elapsed_s=1.0,
        stages=[StageRecord(name="measurement", status="timeout" if failed else "ok", duration_s=0.5)],
        error=ErrorInfo(kind="timeout", message="measurement exceeded 15.0 s") if failed else None,
        config={"iterations": len(samples or []), "device": "auto"},
        device=device,
        timing=timing,
        memory=Memory(device=device, peak_mb=100.0) if timing else None,
        work=Work(bytes=work_bytes, flops=work_flops, **stated(ceiling)) if work_bytes or work_flops else None,
        manifest=manifest,
    )


def stated(ceiling: tuple[str, float, float] | None) -> dict[str, str | float]:
    """A stated ceiling (name, ms, target %) as Work's fields."""
    if ceiling is None:
        return {}
    return dict(zip(Work.STATED, ceiling, strict=True))


def pair(base: VariantResult, opt: VariantResult, verified: bool = True) -> Comparison:
    b, o = base.median_ms, opt.median_ms
    ok = base.status == "ok" and opt.status == "ok"
    return Comparison(
        chapter=opt.spec.chapter,
        example=opt.spec.example,
        variant=opt.spec.variant,
        baseline_status=base.status,
        optimized_status=opt.status,
        baseline_median_ms=b,
        optimized_median_ms=o,
        speedup=b / o if b is not None and o is not None else None,
        status=("ok" if verified else "mismatch") if ok else "failed",
        verification=Verification(
            verified=verified and ok,
            outcome="match" if verified and ok else "mismatch",
            detail="equal" if verified else "max relative error 0.3 above rtol 1e-5",
        ),
    )


def log_suite(
    store: Store,
    experiment: str,
    results: Sequence[VariantResult],
    verified: dict[str, bool] | None = None,
    host: dict | None = None,
) -> tuple[str, dict[str, str]]:
    """Log one suite; optimized variants are paired with their example's baseline when it is in
    ``results``; ``host`` is the host manifest (its ``git`` gives the parent's commit tags).
    Returns ``(parent run id, {variant key: run id})``."""
    if store.client.get_experiment_by_name(experiment) is None:
        store.experiment(experiment)
    baselines = {r.spec.target: r for r in results if r.spec.is_baseline}
    ids = {}
    with Tracker(experiment=experiment, tracking_uri=store.uri, run_name="perflab run", host_manifest=host or {}) as t:
        for r in sorted(results, key=lambda r: not r.spec.is_baseline):  # baselines first, as the suite does
            base = baselines.get(r.spec.target)
            cmp = None if r.spec.is_baseline or base is None else pair(base, r, (verified or {}).get(r.spec.key, True))
            ids[r.spec.key] = t.log_variant(r, cmp)
        t.finish("# synthetic\n", {})
    return t.parent_run_id, ids
