"""Baseline vs optimized: output verification and speedup, computed in the parent from two results.

Verification is norm-wise relative error, ‖out − ref‖₂ / ‖ref‖₂, per output tensor, against a
tolerance chosen by dtype (or ``BenchmarkConfig.rtol``). It never passes by default:

* no output on either side ⇒ not verified;
* a reference that is all zeros or constant ⇒ not verified (it cannot tell right from wrong);
* different shapes, dtypes (dtype drift, INTEGRITY #11) or devices ⇒ mismatch;
* any NaN/Inf ⇒ mismatch.
"""

from __future__ import annotations

from typing import Any

from bench.result import Comparison, PairStatus, VariantResult, Verification

# Norm-wise relative error allowed when baseline and optimized differ only in summation order.
DEFAULT_RTOL: dict[str, float] = {
    "float64": 1e-10,
    "complex128": 1e-10,
    "float32": 1e-5,
    "complex64": 1e-5,
    "float16": 2e-3,
    "bfloat16": 1.6e-2,
    "float8_e4m3fn": 1.3e-1,
    "float8_e5m2": 2.5e-1,
}


def default_rtol(dtype: str) -> float:
    """0.0 (exact) for integer and bool outputs."""
    return DEFAULT_RTOL.get(dtype, 0.0)


def compare_tensors(ref: list[Any], out: list[Any], rtol: float | None) -> Verification:
    """Compare two lists of CPU tensors (baseline = reference)."""
    import torch

    if len(ref) != len(out):
        return Verification(
            verified=False, detail=f"baseline returned {len(ref)} outputs, optimized {len(out)}", outcome="mismatch"
        )
    worst = 0.0
    used_rtol = 0.0
    for i, (r, o) in enumerate(zip(ref, out, strict=True)):
        name = f"output[{i}]"
        if tuple(r.shape) != tuple(o.shape):
            return Verification(
                verified=False, detail=f"{name}: shape {tuple(r.shape)} vs {tuple(o.shape)}", outcome="mismatch"
            )
        rd, od = str(r.dtype).replace("torch.", ""), str(o.dtype).replace("torch.", "")
        if rd != od:
            return Verification(
                verified=False,
                detail=f"{name}: dtype drift, baseline {rd} vs optimized {od}; if lower precision is the "
                "declared optimization, cast in get_output() and set rtol in get_config()",
                outcome="mismatch",
            )
        if r.numel() == 0:
            return Verification(verified=False, detail=f"{name}: empty tensor proves nothing")
        tol = rtol if rtol is not None else default_rtol(rd)
        used_rtol = max(used_rtol, tol)
        fast = _fast_error(r, o, name, tol)
        if isinstance(fast, Verification):
            return fast
        if fast is not None:
            err = fast
        else:
            if r.is_floating_point() or r.is_complex():
                r64, o64 = (
                    r.to(torch.complex128 if r.is_complex() else torch.float64),
                    o.to(torch.complex128 if o.is_complex() else torch.float64),
                )
                # On the float64 copies: torch has no isfinite for float8 tensors.
                if not bool(torch.isfinite(r64).all()) or not bool(torch.isfinite(o64).all()):
                    return Verification(
                        verified=False, detail=f"{name}: NaN or Inf in the output", rtol=tol, outcome="mismatch"
                    )
            else:
                r64, o64 = r.to(torch.float64), o.to(torch.float64)
            ref_norm = float(torch.linalg.vector_norm(r64))
            if ref_norm == 0.0:
                return Verification(
                    verified=False, detail=f"{name}: reference is all zeros; it cannot detect a wrong result"
                )
            if r.numel() > 1 and bool((r64 == r64.flatten()[0]).all()):
                return Verification(
                    verified=False, detail=f"{name}: reference is constant; it cannot detect a wrong result"
                )
            err = float(torch.linalg.vector_norm(o64 - r64)) / ref_norm
        worst = max(worst, err)
        if not err <= tol:
            where = ""
            if not (r.is_floating_point() or r.is_complex()):  # e.g. generated tokens: which entries differ
                diff = (r != o).flatten().nonzero()
                where = f"; {diff.numel()} of {r.numel()} entries differ, the first at flat index {int(diff[0])}"
            return Verification(
                verified=False,
                detail=f"{name}: relative error {err:.3e} exceeds rtol {tol:.1e} ({rd}){where}",
                max_rel_error=err,
                rtol=tol,
                outcome="mismatch",
            )
    return Verification(
        verified=True,
        outcome="match",
        detail=f"{len(ref)} output(s) match: max relative error {worst:.2e} <= rtol {used_rtol:.1e}",
        max_rel_error=worst,
        rtol=used_rtol,
    )


# Magnitudes (largest |value| of either tensor) inside which the norms are exact enough in fp32: no
# square overflows (2^80 per element, 2^120 summed over 2^40 elements), and what underflows is
# negligible against a norm of at least 2^-40. Outside, the float64 path.
_FP32_SAFE = (2.0**-40, 2.0**40)


def _fast_error(r: Any, o: Any, name: str, tol: float) -> float | Verification | None:
    """The norm-wise relative error of a real floating output in few passes and no float64 copies.

    One ``aminmax`` per tensor finds NaN/Inf (it propagates NaN; an Inf is an extreme) and a constant
    reference (min == max); the difference and the norms run in float32, which is exact for the
    difference of two fp32 values within 2x of each other (Sterbenz) and ~1e-7 relative otherwise. On
    the 2-core CI machine a 64 Mi-element fp32 pair took 1.16 s the float64 way; the aminmax pass 7 ms
    where two isfinite passes took 0.44 s. None: use the float64 path (float64 outputs, fp8, or
    magnitudes outside _FP32_SAFE)."""
    import torch

    if r.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    r32, o32 = r.float(), o.float()  # no copy for fp32
    (r_min, r_max), (o_min, o_max) = torch.aminmax(r32), torch.aminmax(o32)
    extremes = torch.stack([r_min, r_max, o_min, o_max])
    if not bool(torch.isfinite(extremes).all()):
        return Verification(verified=False, detail=f"{name}: NaN or Inf in the output", rtol=tol, outcome="mismatch")
    big = float(extremes.abs().max())
    if big == 0.0 or float(r_min) == float(r_max):  # all zeros, constant
        return None  # the float64 path words the verdict
    if not _FP32_SAFE[0] <= big <= _FP32_SAFE[1]:
        return None
    ref_norm = float(torch.linalg.vector_norm(r32))
    if ref_norm == 0.0:
        return None
    return float(torch.linalg.vector_norm(o32 - r32)) / ref_norm


_PAIR_STATUS: dict[str, PairStatus] = {"match": "ok", "mismatch": "mismatch", "inconclusive": "unverified"}

# The spread of one run's median between processes (relative standard deviation) when the config leaves
# run_noise unset: samples of one process cannot show it (memory placement, clocks, the host's state).
RUN_NOISE = {"gpu": 0.005, "host": 0.02}
BOOTSTRAP = 2000


def compare(baseline: VariantResult, optimized: VariantResult, in_server: bool = False) -> Comparison:
    """Pair status, verification and speedup (baseline median / optimized median, never clamped) with its
    95 % interval, on the time the optimized variant's config names (``speedup_time``: cold or batch).

    ``in_server``: load and compare the outputs in a fresh child of the pre-warmed server (bench.server),
    so the parent never imports torch (~4 s on a GPU host, which the first comparison would wait for);
    should that child fail, here."""
    spec = optimized.spec
    basis, base_samples, opt_samples = _basis(baseline, optimized)
    common: dict[str, Any] = {
        "chapter": spec.chapter,
        "example": spec.example,
        "variant": spec.variant,
        "baseline_status": baseline.status,
        "optimized_status": optimized.status,
        "baseline_median_ms": _median(base_samples),
        "optimized_median_ms": _median(opt_samples),
        "speedup_time": basis,
    }
    skipped = [r for r in (baseline, optimized) if r.status == "skipped"]
    if skipped:
        reasons = "; ".join(f"{r.spec.variant}: {r.skip_reason}" for r in skipped)
        skipped = Verification(verified=False, detail=f"skipped ({reasons})")
        return Comparison(**common, status="skipped", verification=skipped)
    if baseline.status != "ok" or optimized.status != "ok":
        which = "baseline" if baseline.status != "ok" else "optimized"
        bad = baseline if which == "baseline" else optimized
        reason = bad.error.message if bad.error else bad.status
        return Comparison(
            **common,
            status="failed",
            verification=Verification(verified=False, detail=f"{which} {bad.status}: {reason}"),
        )
    verification = _verify(baseline, optimized, in_server)
    speedup = low = high = None
    b, o = common["baseline_median_ms"], common["optimized_median_ms"]
    same_hardware = not verification.detail.startswith("ran on different devices")
    noise = _run_noise(optimized)
    if b is not None and o is not None and o > 0 and same_hardware:  # no speedup across GPU models
        speedup = b / o
        interval = speedup_interval(base_samples, opt_samples, noise)
        if interval is not None:
            low, high = interval
    metric = "time"
    if same_hardware and optimized.generation is not None:  # token generation: the metric the pair names
        from bench.generation import pair_interval, pair_speedup

        speedup, metric = pair_speedup(baseline, optimized, speedup)
        if metric != "time":
            low, high = pair_interval(baseline, optimized, metric, noise) or (None, None)
    status: PairStatus = _PAIR_STATUS[verification.outcome]
    significance = None
    if low is not None and high is not None:
        significance = "faster" if low > 1.0 else "slower" if high < 1.0 else "no significant difference"
    return Comparison(
        **common,
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
        significance=significance,
        speedup_metric=metric,
        status=status,
        verification=verification,
        across_gpus=_across(baseline, optimized),
    )


def _run_noise(optimized: VariantResult) -> float:
    """The run-to-run spread of a median (config ``run_noise``, else RUN_NOISE by clock)."""
    noise = optimized.config.get("run_noise")
    if noise is None:
        host = optimized.timing is not None and optimized.timing.mode == "cpu"
        noise = RUN_NOISE["host" if host else "gpu"]
    return float(noise)


def _basis(baseline: VariantResult, optimized: VariantResult) -> tuple[str, list[float], list[float]]:
    """The time the speedup is on and both sides' raw per-call samples of it: batch when the optimized
    variant's config asks for it and both sides measured it, else cold (the primary)."""
    if optimized.config.get("speedup_time") == "batch" and baseline.batch and optimized.batch:
        return "batch", baseline.batch.samples_ms, optimized.batch.samples_ms
    cold = [r.timing.samples_ms if r.timing else [] for r in (baseline, optimized)]
    return "cold", cold[0], cold[1]


def _median(samples: list[float]) -> float | None:
    import statistics

    return statistics.median(samples) if samples else None


def speedup_interval(
    baseline_ms: list[float], optimized_ms: list[float], run_noise: float, n: int = BOOTSTRAP, seed: int = 0
) -> tuple[float, float] | None:
    """95 % interval of median(baseline) / median(optimized): a percentile bootstrap over both sides' raw
    samples (resampled independently), each half-width then widened in log space by the run-to-run term
    1.96·√2·``run_noise`` (two runs, each its median's spread between processes), added in quadrature.
    None with fewer than 2 samples on a side."""
    if len(baseline_ms) < 2 or len(optimized_ms) < 2:
        return None
    import math

    import numpy as np

    rng = np.random.default_rng(seed)
    b, o = np.asarray(baseline_ms, dtype=np.float64), np.asarray(optimized_ms, dtype=np.float64)
    ratios = []
    chunk = max(1, 2_000_000 // max(b.size, o.size))  # bounded memory for long sample lists
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        mb = np.median(b[rng.integers(0, b.size, (k, b.size))], axis=1)
        mo = np.median(o[rng.integers(0, o.size, (k, o.size))], axis=1)
        ratios.append(mb / mo)
    r = np.concatenate(ratios)
    lo, hi = np.percentile(r, [2.5, 97.5])
    center = math.log(float(np.median(b)) / float(np.median(o)))
    extra = 1.96 * math.sqrt(2.0) * run_noise
    down = math.sqrt(max(center - math.log(lo), 0.0) ** 2 + extra**2)
    up = math.sqrt(max(math.log(hi) - center, 0.0) ** 2 + extra**2)
    return math.exp(center - down), math.exp(center + up)


def _across(baseline: VariantResult, optimized: VariantResult) -> str | None:
    """"<baseline's GPU> vs <optimized's>" when the two ran on different physical GPUs (by the GPU's UUID in
    their manifests, else their workers' CUDA_VISIBLE_DEVICES); None when on one, or on the CPU."""
    b_uuid, o_uuid = (_gpu(r, "uuid") for r in (baseline, optimized))
    b_vis, o_vis = baseline.cuda_visible_devices, optimized.cuda_visible_devices
    differ = b_uuid != o_uuid if b_uuid and o_uuid else (b_vis is not None and o_vis is not None and b_vis != o_vis)
    return f"{b_vis or b_uuid} vs {o_vis or o_uuid}" if differ else None


def _gpu(result: VariantResult, field: str = "name") -> str | None:
    """A field of the GPU in the variant's manifest (its model name by default); None on the CPU."""
    gpu = result.manifest.get("gpu")
    value = gpu.get(field) if isinstance(gpu, dict) else None
    return str(value) if value else None


def _verify(baseline: VariantResult, optimized: VariantResult, in_server: bool = False) -> Verification:
    if baseline.device != optimized.device or _gpu(baseline) != _gpu(optimized):
        return Verification(
            verified=False,
            detail=f"ran on different devices: baseline {baseline.device} ({_gpu(baseline)}) vs "
            f"optimized {optimized.device} ({_gpu(optimized)}); no comparison across devices",
        )
    missing = " and ".join(
        n for n, r in (("baseline", baseline), ("optimized", optimized)) if r.output is None or r.output.path is None
    )
    if missing:
        return Verification(
            verified=False, detail=f"no output from {missing} (get_output() missing or None): not verified"
        )
    work = _work_differs(baseline, optimized)
    if work:
        return Verification(verified=False, outcome="mismatch", detail=work)
    assert baseline.output is not None and optimized.output is not None
    pairs = [_files(baseline.output, optimized.output)]
    fresh = [r.recheck.fresh if r.recheck else None for r in (baseline, optimized)]
    if fresh[0] is not None and fresh[1] is not None:
        pairs.append(_files(fresh[0], fresh[1]))
    rtol = optimized.config.get("rtol")
    if in_server:
        from bench.config import BenchmarkConfig
        from bench.runner import in_server as run_in_server
        from bench.server import ServerError

        try:
            results = run_in_server(
                verify_all, pairs, rtol, timeout=BenchmarkConfig(**optimized.config).stage_limit("check")
            )
        except (OSError, ServerError):
            results = verify_all(pairs, rtol)  # the child failed (not the comparison): compare here
    else:
        results = verify_all(pairs, rtol)
    main = results[0]
    if not main.verified:
        return main
    if len(results) == 1:
        why = _why_not_rechecked(baseline, optimized)
        return main.model_copy(update={"detail": f"{main.detail}; {why}"})
    again = results[1]
    if not again.verified:
        return again.model_copy(
            update={
                "detail": "outputs match on the set-up inputs but not once the inputs were changed (a cached or "
                f"precomputed result?): {again.detail}"
            }
        )
    return main.model_copy(update={"detail": f"{main.detail}; again on changed inputs ({again.detail})"})


def _files(a: Any, b: Any) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
    return (a.path, [t.model_dump() for t in a.tensors]), (b.path, [t.model_dump() for t in b.tensors])


def _why_not_rechecked(baseline: VariantResult, optimized: VariantResult) -> str:
    for name, r in (("baseline", baseline), ("optimized", optimized)):
        if not r.config.get("check_inputs", True):
            return f"not checked on changed inputs ({name}: check_inputs is off)"
        if r.recheck is None or r.recheck.fresh is None:
            if r.recheck is not None and r.recheck.perturbed == 0:
                return f"not checked on changed inputs ({name} has no floating tensor set up in setup())"
            return f"not checked on changed inputs ({name} made no such call)"
    return "not checked on changed inputs"


def _work_differs(baseline: VariantResult, optimized: VariantResult) -> str | None:
    """Both sides of a pair do the same work (INTEGRITY #4): declared work counts must agree."""
    b = baseline.work.model_dump(exclude_none=True) if baseline.work else {}
    o = optimized.work.model_dump(exclude_none=True) if optimized.work else {}
    if b != o:
        return (
            f"declared work differs: baseline {b or 'none'} vs optimized {o or 'none'}; both sides of a pair do "
            "the same work and declare it alike (get_work())"
        )
    return None


def verify_all(
    pairs: list[tuple[tuple[str, list[Any]], tuple[str, list[Any]]]], rtol: float | None
) -> list[Verification]:
    """``verify_files`` for each (reference, output) pair, stopping at the first that does not verify."""
    out = []
    for ref, got in pairs:
        out.append(verify_files(ref, got, rtol))
        if not out[-1].verified:
            break
    return out


def verify_files(ref: tuple[str, list[Any]], out: tuple[str, list[Any]], rtol: float | None) -> Verification:
    """Compare two variants' saved outputs, each (directory, tensor infos) as bench.outputs saved them
    (baseline = reference); the files are mapped, not read into fresh memory."""
    from bench import outputs

    return compare_tensors(outputs.load(*ref), outputs.load(*out), rtol)
