"""What a variant's MLflow run carries: its tags, metrics and params, computed from results alone.

The contract readers rely on (docs/mlflow.md lists it): ``perflab.*`` tags, ``time_*_ms`` / ``batch_time_*`` /
``mem_*_mb`` / derived throughput / ``stage_<name>_s`` metrics, the effective config as params. Only what was measured
is logged: a variant that failed, timed out or was skipped gets no timing metric, and no metric is ever invented (no
zeros, no NaNs standing in for a missing time). No mlflow here: ``bench.record.tracking`` writes what these return.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections.abc import Mapping
from typing import Any

from bench.define.result import Comparison, EnergyUse, Recheck, Timing, VariantResult
from bench.measure.ceilings import binding_ceiling, hardware_key, peak_metrics

# Statuses that mean the variant did not produce a trustworthy number (``skipped`` is deliberate).
FAILED_STATUSES = frozenset({"failed", "timeout", "invalid"})
# Store limits (mlflow.utils.validation): longer values are rejected, not truncated, by the store.
MAX_PARAM_LEN = 6000
MAX_TAG_LEN = 8000
MAX_DETAIL_LEN = 5000  # verification / error text kept in tags; the full text is in result.json
# Context tags copied from the parent to variant runs so the UI's source/user/commit columns fill.
CONTEXT_TAG_PREFIXES = ("mlflow.source.", "mlflow.user", "mlflow.project.", "mlflow.gitRepoURL")
# Characters MLflow accepts in metric/param names on every OS (colon is refused on Windows).
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ")


def name(key: str) -> str:
    """A metric/param name MLflow accepts everywhere (e.g. a percentile label from a config)."""
    return "".join(c if c in _NAME_OK else "_" for c in key)


def clip(text: str, limit: int = MAX_DETAIL_LEN) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def param_value(value: Any) -> str:
    """Params are strings; lists read better comma-joined ("25.0,50.0") than as a Python repr."""
    if isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = json.dumps(value, sort_keys=True, default=str)
    else:
        text = str(value)
    return clip(text, MAX_PARAM_LEN)


def finite(metrics: Mapping[str, float | None] | None) -> dict[str, float]:
    return {name(k): float(v) for k, v in (metrics or {}).items() if v is not None and math.isfinite(v)}


def params(values: Mapping[str, Any] | None) -> dict[str, str]:
    return {name(k): param_value(v) for k, v in (values or {}).items()}


# ------------------------------------------------------------------------------------------ metrics


def variant_metrics(result: VariantResult) -> dict[str, float]:
    """Every number the result actually holds, under MLflow-legal names; nothing filled in.

    Non-finite values are dropped rather than logged: a NaN in the store reads as a measurement.
    """
    out: dict[str, float | None] = {}
    if result.timing is not None:
        out.update(_timing_metrics(result.timing))
    if result.batch is not None:  # back-to-back calls, warm L2 (bench.measure.clocks: the batch kind)
        bt = result.batch.stats
        out.update(
            batch_time_median_ms=bt.median_ms,
            batch_time_min_ms=bt.min_ms,
            batch_time_iqr_ms=bt.iqr_ms,
            batch_calls=float(result.batch.calls),
            batch_n_samples=float(bt.n),
        )
        for label in ("p90", "p99"):
            if label in bt.percentiles_ms:
                out[f"batch_time_{label}_ms"] = bt.percentiles_ms[label]
    if result.energy is not None:
        out.update(energy_metrics(result))
    if result.recheck is not None and result.recheck.restored_ms is not None:
        out["recheck_restored_ms"] = result.recheck.restored_ms
    if result.memory is not None:
        mem = result.memory
        out.update(mem_peak_mb=mem.peak_mb, mem_allocated_mb=mem.allocated_mb, mem_reserved_mb=mem.reserved_mb,
                   mem_rss_peak_mb=mem.rss_peak_mb, mem_harness_mb=mem.harness_mb)  # fmt: skip
        if mem.call_peaks_mb:  # a memory pair's readings (bench.measure.memory): their median
            out["mem_call_peak_mb"] = statistics.median(mem.call_peaks_mb)
        # a variant of several ranks: each one's own peak and median call peak (the figures above are their max)
        out.update({f"mem_rank{rank}_peak_mb": peak for rank, peak in enumerate(mem.rank_peak_mb)})
        out.update({f"mem_rank{rank}_call_peak_mb": statistics.median(own)
                    for rank, own in enumerate(mem.rank_call_peaks_mb) if own})  # fmt: skip
    if result.quality is not None and result.quality.readings:  # a quality pair's readings: their mean, count
        q = result.quality.readings
        out.update(quality_mean=sum(q) / len(q), quality_n=float(len(q)))
    out.update({name(k): v for k, v in result.derived_metrics().items()})
    if result.generation is not None:  # token generation: ttft_*/tpot_* (median, p90, p99), tokens/s, requests/s
        out.update(result.generation.metrics())
    if result.profile is not None:  # prof_* / ncu_* from the separate profile child(ren)
        out.update({name(k): v for k, v in result.profile.metrics.items()})
    out.update(peak_metrics(result))  # percent of the device's cached ceiling (`perflab peak`), or of a stated one
    if result.work is not None and result.work.ceiling_ms is not None:  # the benchmark's own ceiling
        out.update(ceiling_ms=result.work.ceiling_ms, ceiling_target_pct=result.work.ceiling_target_pct)
    out.update({name(f"stage_{s.name}_s"): s.duration_s for s in result.stages})
    if result.elapsed_s > 0:  # 0.0 is the model's default for "never started", not a measurement
        out["elapsed_s"] = result.elapsed_s
    # How the child got going: its CUDA context, its start ahead (bench.isolate.workers).
    out.update(cuda_start_s=result.cuda_start_s, ahead_s=result.ahead_s, gate_late_s=result.gate_late_s)
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def energy_metrics(result: VariantResult) -> dict[str, float | None]:
    """The board's energy per call (median of the window's segments), its power, the window's time per call, and the
    energy per declared unit of work (pJ per FLOP, per byte) and per generated token; nothing when none measured."""
    e = result.energy
    mj = e.median_mj if e is not None else None
    if e is None or mj is None:
        return {}
    out: dict[str, float | None] = {
        "energy_per_call_mj": mj, "energy_power_w": statistics.median(e.power_w), "energy_call_ms": e.per_call_ms,
        "energy_window_s": e.window_s, "energy_segments": float(len(e.samples_mj)), "energy_step_ms": e.step_ms,
    }  # fmt: skip
    work = result.work
    if work is not None and work.flops:
        out["energy_pj_per_flop"] = mj * 1e9 / work.flops
    if work is not None and work.bytes:
        out["energy_pj_per_byte"] = mj * 1e9 / work.bytes
    if result.generation is not None and result.generation.tokens:  # a call is one generation of this many tokens
        out["energy_per_token_mj"] = mj / result.generation.tokens
    return out


def _timing_metrics(t: Timing) -> dict[str, float | None]:
    st = t.stats
    out: dict[str, float | None] = {
        "time_mean_ms": st.mean_ms, "time_median_ms": st.median_ms, "time_std_ms": st.std_ms,
        "time_min_ms": st.min_ms, "time_max_ms": st.max_ms, "time_iqr_ms": st.iqr_ms, "time_cv": st.cv,
        "n_samples": float(st.n),
    }  # fmt: skip
    for label, value in st.percentiles_ms.items():  # "p50", "p99_9" → time_p50_ms, time_p99_9_ms
        out[name(f"time_{label}_ms")] = value
    out["time_first_call_ms"] = t.first_call_ms
    out["warmup_calls"] = float(t.warmup_calls)
    out["timing_noise_pct"] = 100.0 * t.noise if t.noise is not None else None
    out["timing_target_met"] = float(t.target_met) if t.target_met is not None else None
    sm = t.machine_after.get("sm_clock_mhz")
    out["gpu_sm_clock_after_mhz"] = float(sm) if sm is not None else None
    # a variant of several ranks: each one's own median (its samples are the slowest rank's)
    for rank, own in enumerate(t.rank_samples_ms or []):
        if own:
            out[f"time_rank{rank}_median_ms"] = statistics.median(own)
    return out


def suite_counts(results: list[VariantResult], comparisons: list[Comparison]) -> dict[str, float]:
    """Parent-run metrics: outcome counts, and the geometric-mean speedup of verified pairs."""
    counts: dict[str, float] = {
        "n_variants": float(len(results)),
        "n_ok": float(sum(r.status == "ok" for r in results)),
        "n_failed": float(sum(r.status in FAILED_STATUSES for r in results)),
        "n_skipped": float(sum(r.status == "skipped" for r in results)),
        "n_pairs": float(len(comparisons)),
        "n_pairs_ok": float(sum(c.status == "ok" for c in comparisons)),
        "n_verified": float(sum(c.verification.verified for c in comparisons)),
    }
    # Geometric mean: speedups are ratios, so 2x and 0.5x must cancel to 1x, not average to 1.25x.
    good = [c.speedup for c in comparisons if c.status == "ok" and c.speedup and c.speedup > 0]
    if good:
        counts["speedup_geomean"] = math.exp(sum(math.log(s) for s in good) / len(good))
    return counts


def suite_time_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """Parent-run metrics of where the suite's time went (``summary.json``'s ``stages_s``, bench.record.summary):
    ``stage_<part>_s`` summed over its variants, and its ``wall_s``."""
    out = {f"stage_{part}_s": float(s) for part, s in (summary.get("stages_s") or {}).items()}
    if summary.get("wall_s") is not None:
        out["wall_s"] = float(summary["wall_s"])
    return out


def suite_tags(
    results: list[VariantResult],
    counts: Mapping[str, float],
    failed: bool,
    targets: bool,
    interrupted: bool = False,
    status: str | None = None,
) -> dict[str, str]:
    """A suite's parent tags at its end: its counts and status; ``targets``: the targets its variants ran;
    ``interrupted``: stopped by Ctrl-C or a signal (SIGTERM, SIGHUP), its finished variants logged; ``status``: how
    it ended where the caller knows better (``timeout``: ``perflab run --suite-timeout``)."""
    tags = {
        "perflab.n_variants": str(int(counts["n_variants"])),
        "perflab.n_failed": str(int(counts["n_failed"])),
        "perflab.suite_status": status or ("interrupted" if interrupted else "failed" if failed else "completed"),
    }
    if targets:
        tags["perflab.targets"] = clip(",".join(sorted({r.spec.target for r in results})), MAX_TAG_LEN)
    return tags


# ------------------------------------------------------------------------------------ params and tags


def context_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The tags of MLflow's run context (source, user, project, repository) among ``tags``."""
    return {k: v for k, v in tags.items() if k.startswith(CONTEXT_TAG_PREFIXES)}


def commit_tags(host_manifest: Mapping[str, Any]) -> dict[str, str]:
    """The suite's commit from the host manifest, as parent tags: MLflow's own git tag is missing on a
    host whose copy has no history (the manifest then has the commit from ``PERFLAB_GIT_COMMIT``)."""
    git = host_manifest.get("git") or {}
    tags = {"perflab.git_commit": git.get("commit"), "perflab.git_dirty": git.get("dirty")}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in tags.items() if v is not None}


def suite_name(results: list[VariantResult], started: float) -> str:
    """A suite's name for a person: its chapters (``ch07``; ``ch01, ch07``; ``20 chapters``), the device
    (the GPU's model, else ``cpu``) and the local start time."""
    chapters = sorted({r.spec.chapter for r in results})
    which = ", ".join(chapters) if len(chapters) <= 3 else f"{len(chapters)} chapters"
    gpus = sorted({str(g["name"]) for r in results if isinstance(g := r.manifest.get("gpu"), dict) and g.get("name")})
    devices = sorted({(r.device or "?").split(":")[0] for r in results if r.device})
    device = ", ".join(gpus) or ", ".join(devices) or "?"
    return f"{which} on {device}, {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}"


def variant_files(result: VariantResult, host: Mapping[str, Any]) -> dict[str, str]:
    """A variant run's text artifacts: ``result.json`` (the whole result) and ``manifest.json`` (the host it ran
    on, its device, seeds and effective config)."""
    manifest = {
        "host": host,
        "device": result.manifest,
        # Seeds and every other setting the variant actually ran with (all layers applied).
        "seeds": {"random/numpy/torch/cuda": result.config.get("seed")},
        "config": result.config,
    }
    text = json.dumps(manifest, indent=2, default=str)
    return {"result.json": numbers_inline(result.model_dump_json(indent=2)), "manifest.json": text}


# A JSON array of numbers alone, indented one number a line (what ``indent`` writes): JSON strings hold no raw
# newline, so only the layout's whitespace matches.
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_NUMBER_ARRAY = re.compile(rf"\[\n\s*({_NUMBER}(?:,\n\s*{_NUMBER})*)\n\s*\]")


def numbers_inline(text: str) -> str:
    """Indented JSON with each array of numbers on one line: the same document, a serving variant's per-token
    samples (tens of thousands of numbers) about half the bytes and a line per generation."""
    return _NUMBER_ARRAY.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)


def variant_params(result: VariantResult) -> dict[str, str]:
    """The effective config, plus ``device`` = the device actually used.

    The config's own ``device`` is often "auto"; the resolved one ("cuda:0") is what a reader
    filters on, so it takes the key and the requested value moves to ``device_requested``.
    """
    out = params(result.config)
    out.update(params({f"size.{k}": v for k, v in result.sizes.items()}))  # context().working_set
    requested = out.get("device")
    if result.device is not None:
        out["device"] = result.device
        if requested is not None and requested != result.device:
            out["device_requested"] = requested
    return out


def host_tags(host: Mapping[str, Any]) -> dict[str, str]:
    """The machine a variant ran on, from its host manifest: name and CPU model (a wall-clock pair's speedup
    depends on the CPU as much as on the GPU); an unknown one is left out."""
    return {tag: str(host[key]) for tag, key in (("perflab.host", "hostname"), ("perflab.cpu", "cpu")) if host.get(key)}


def variant_tags(result: VariantResult) -> dict[str, str]:
    """``perflab.*`` tags of a variant run; a tag whose value is unknown is left out, never "None"."""
    spec = result.spec
    gpu = result.manifest.get("gpu")
    tags = {
        "perflab.chapter": spec.chapter,
        "perflab.example": spec.example,
        "perflab.variant": spec.variant,
        "perflab.target": spec.target,
        "perflab.status": result.status,
    }
    optional: dict[str, Any] = {
        "perflab.failed_stage": result.failed_stage,
        "perflab.source_sha256": spec.source_sha256,  # the file timed, as found (not its imports)
        "perflab.device": result.device or result.config.get("device"),
        "perflab.timing_mode": result.timing.mode if result.timing else result.config.get("timing_mode"),
        "perflab.gpu": gpu.get("name") if isinstance(gpu, Mapping) else None,
        "perflab.hardware": hardware_key(result),  # the peak cache / expectations key
        "perflab.peak_ceiling": ceiling[1] if (ceiling := binding_ceiling(result)) else None,  # pct_of_peak's
        "perflab.ceiling": result.work.ceiling if result.work else None,  # a stated ceiling's name (Work.ceiling)
        # Software versions beside the hardware key: regression history is searched on all three.
        "perflab.torch": result.manifest.get("torch"),
        "perflab.triton": result.manifest.get("triton"),
        "perflab.limit_s": result.limit_s,
        "perflab.launch": result.launch,
        # Which physical GPU "cuda:0" was (the worker's CUDA_VISIBLE_DEVICES under --gpus).
        "perflab.cuda_visible_devices": result.cuda_visible_devices,
        "perflab.error_kind": result.error.kind if result.error else None,
        "perflab.error": clip(result.error.message) if result.error else None,
        "perflab.validation": clip(result.validation) if result.validation else None,
        "perflab.skip_reason": clip(result.skip_reason) if result.skip_reason else None,
        "perflab.arrival": result.generation.arrival if result.generation else None,  # token generation
        "perflab.batch": clip(result.batch.method) if result.batch is not None else None,
        "perflab.energy": clip(energy_text(result.energy)) if result.energy is not None else None,
        "perflab.tampered": clip(", ".join(result.tampered)) if result.tampered else None,
        "perflab.recheck": clip(recheck_summary(result.recheck)) if result.recheck is not None else None,
    }
    if result.timing is not None:
        optional.update(_timing_tags(result.timing))
    if result.memory is not None:  # a variant of several ranks: the rank that held the most
        optional["perflab.mem_peak_rank"] = result.memory.peak_rank
        optional["perflab.mem_call_peak_rank"] = result.memory.call_peak_rank
    p = result.profile
    if p is not None:
        optional["perflab.bound"] = p.bound
        optional["perflab.bound_evidence"] = p.bound_evidence and clip(p.bound_evidence)
        optional.update({f"perflab.profile_{tool}": clip(state) for tool, state in p.tools.items()})
    tags.update({k: str(v) for k, v in optional.items() if v is not None})
    return tags


def _timing_tags(t: Timing) -> dict[str, str | None]:
    drift = next((n for n in t.notes if n.startswith("drift:")), None)
    return {
        "perflab.timing_notes": clip("; ".join(t.notes)) if t.notes else None,
        "perflab.timing_fallback": t.fallback,
        "perflab.timing_stop": t.stop_reason,
        # The tag describes the primary time_* (cold: one call per sample); batch_time_* is always warm.
        "perflab.l2": "flushed" if t.l2_flushed else "warm",
        "perflab.warmup": {True: "steady", False: "unsteady"}.get(t.warmup_stable),  # type: ignore[arg-type]
        "perflab.drift": clip(drift) if drift else None,
        "perflab.machine_flags": clip("; ".join(t.machine_flags)) if t.machine_flags else None,
    }


def energy_text(e: EnergyUse) -> str:
    """How the energy was measured and what weakens it, or why it was not."""
    if e.unavailable:
        return f"not measured: {e.unavailable}"
    return "; ".join([e.method or "measured", *e.notes])


def recheck_summary(r: Recheck) -> str:
    parts = []
    if r.mutated:
        same = {True: "same output", False: "a different output", None: "output not compared"}[r.restored_same_output]
        parts.append(f"timed calls changed {', '.join(r.mutated[:4])}; a call from the set-up state: {same}")
        parts += [f"the restore comparison cut at {len(r.restored_times_ms)} rounds by its limit"] * r.restore_cut
    if r.perturbed == 0:
        parts.append("no floating tensor to change")
    elif r.perturbed is not None:
        followed = "followed" if r.output_changed else "did not change"
        parts.append(f"{r.perturbed} set-up tensor(s) changed: output {followed}")
    return "; ".join(parts) or "nothing to report"
