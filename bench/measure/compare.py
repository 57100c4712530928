"""Baseline vs optimized: a pair's status, verification and speedup, computed in the parent from two results.

The speedup is baseline median / optimized median on the time the optimized variant's config names (cold or
batch; a token-generating pair's metric: TTFT, TPOT, throughput; a memory pair's peak: bench.measure.memory; a
quality pair's score or error: bench.measure.quality),
never clamped, with a 95 % interval (``bench.measure.stats.speedup_interval``) and its significance: "faster" or
"slower" only beyond ±``noise_threshold`` on a time (``bench.measure.stats.significance``; beyond 1.0 on a memory
peak or a quality reading). A pair measured in rounds (both sides' samples in the same rounds, bench.isolate.rounds)
has the geometric mean of its rounds' ratios of medians instead, and a t interval over them
(``bench.measure.rounds``): the round-to-round spread is in it.
Verification (``bench.measure.verify``) never passes by default; a pair on different devices gets no speedup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.define.config import NOISE_THRESHOLD, BenchmarkConfig
from bench.define.result import Comparison, PairStatus, VariantResult, Verification, Work
from bench.measure.memory import MEMORY_METRICS, memory_ratio
from bench.measure.quality import QUALITY_METRICS, quality_ratio, verify_quality
from bench.measure.rounds import round_ratios, rounds_interval, split_rounds
from bench.measure.stats import significance, speedup_interval
from bench.measure.verify import FilePair, verify_all

# verify_all's pairs and rtol, the check stage's limit (s), then verify_all's mode: where and how a pair's outputs
# are compared.
Verifier = Callable[[list[FilePair], float | None, float, str], list[Verification]]

_PAIR_STATUS: dict[str, PairStatus] = {"match": "ok", "mismatch": "mismatch", "inconclusive": "unverified"}

# The spread of one run's median between processes (relative standard deviation) when the config leaves
# run_noise unset: samples of one process cannot show it (memory placement, clocks, the host's state).
RUN_NOISE = {"gpu": 0.005, "host": 0.02}
# The same for energy per call: the board's power follows its temperature (leakage) and the power controller.
ENERGY_RUN_NOISE = 0.02


def compare(  # long: the pair's fields gathered in one place
    baseline: VariantResult, optimized: VariantResult, verify: Verifier | None = None, rounds_stop: str | None = None,
    metric_rounds: list[float] | None = None,
) -> Comparison:  # fmt: skip
    """Pair status, verification and speedup (baseline median / optimized median, never clamped) with its 95 %
    interval, on the time the optimized variant's config names (``speedup_time``: cold or batch); ``rounds_stop``:
    why its rounds stopped (bench.isolate.rounds): an early stop's interval at 98 %, a full run's at 96 %
    (bench.measure.rounds). ``metric_rounds``: each round's speedup on a token-generating pair's metric (TTFT, TPOT,
    throughput) or a memory pair's peak (bench.isolate.rounds.metric_ratios), its speedup and interval taken over them
    as a time's are.

    ``verify``: what loads and compares the saved outputs, ``verify_all``'s pairs and rtol, the check stage's
    limit in seconds and ``verify_all``'s mode (the config's ``verify``, which both sides must declare alike); by
    default ``verify_all`` here, in this process (it imports torch). A suite passes one that runs it in a fresh
    child of the pre-warmed server (bench.isolate.process.verify_in_server): the parent never imports torch."""
    spec = optimized.spec
    basis, base_samples, opt_samples = _basis(baseline, optimized)
    common: dict[str, Any] = {
        "chapter": spec.chapter,
        "example": spec.example,
        "variant": spec.variant,
        "baseline_status": baseline.status,
        "optimized_status": optimized.status,
        "baseline_median_ms": baseline.median_ms,
        "optimized_median_ms": optimized.median_ms,
        "speedup_time": basis,
    }
    skipped = [r for r in (baseline, optimized) if r.status == "skipped"]
    if skipped:
        reasons = "; ".join(f"{r.spec.variant}: {r.skip_reason}" for r in skipped)
        return Comparison(**common, status="skipped", verification=Verification(verified=False,
                          detail=f"skipped ({reasons})"))  # fmt: skip
    if baseline.status != "ok" or optimized.status != "ok":
        which = "baseline" if baseline.status != "ok" else "optimized"
        bad = baseline if which == "baseline" else optimized
        reason = bad.error.message if bad.error else bad.status
        return Comparison(
            **common,
            status="failed",
            verification=Verification(verified=False, detail=f"{which} {bad.status}: {reason}"),
        )
    verification = _verify(baseline, optimized, verify)
    same_hardware = not verification.detail.startswith("ran on different devices")
    time_ratios = _round_ratios(baseline, optimized, basis) if same_hardware else []
    # Rounds give a time's interval (below): no bootstrap over every sample pooled (4.4 s for a pair of a trivial op
    # on the 2-core host, thousands of samples a side), which the rounds' would replace.
    speedup, low, high, metric = _speedup(baseline, optimized, base_samples, opt_samples, same_hardware,
                                          bootstrap=len(time_ratios) < 2)  # fmt: skip
    ratios = time_ratios if metric == "time" else []
    by_metric = metric not in ("time", *QUALITY_METRICS)  # a generation's TTFT, TPOT, throughput; a memory peak
    if same_hardware and by_metric and metric_rounds and len(metric_rounds) >= 2:
        ratios = list(metric_rounds)
    speedup, low, high = (rounds_interval(ratios, rounds_stop) if ratios else None) or (speedup, low, high)
    threshold = noise_threshold(optimized.config, metric) if low is not None and high is not None else None
    energy = _energy_ratio(baseline, optimized) if same_hardware else (None, None, None)
    values = compared_values(baseline, optimized, metric, base_samples, opt_samples) if speedup else (None, None)
    return Comparison(
        **common,
        baseline_value=values[0],
        optimized_value=values[1],
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
        significance=significance(low, high, threshold or 0.0),
        noise_threshold=threshold,
        speedup_metric=metric,
        status=_PAIR_STATUS[verification.outcome],
        verification=verification,
        baseline_energy_mj=baseline.energy.median_mj if baseline.energy else None,
        optimized_energy_mj=optimized.energy.median_mj if optimized.energy else None,
        energy_ratio=energy[0],
        energy_ratio_ci_low=energy[1],
        energy_ratio_ci_high=energy[2],
        round_speedups=ratios,
        rounds_stop=rounds_stop,
    )


def noise_threshold(config: dict[str, Any], metric: str = "time") -> float:
    """The noise threshold a verdict on ``metric`` is judged with (bench.measure.stats.significance): ``config``'s
    ``noise_threshold`` (BenchmarkConfig's default where a result's config predates it) for a time (a call's, a
    generation's TTFT, TPOT or throughput), whose medians differ between processes of the same code (memory
    placement, clocks); 0 for a memory peak or a quality reading, which measure what the pair changes, not a clock."""
    if metric in (*MEMORY_METRICS, *QUALITY_METRICS):
        return 0.0
    value = config.get("noise_threshold")
    return float(NOISE_THRESHOLD if value is None else value)


def compared_values(
    baseline: VariantResult, optimized: VariantResult, metric: str, base_samples: list[float],
    opt_samples: list[float],
) -> tuple[float | None, float | None]:  # fmt: skip
    """Both sides' values the speedup on ``metric`` divides: the medians of the time it is on, a generation's
    statistic (``ttft_p99``: each side's pooled p99 TTFT) or its tokens/s."""
    if metric == "time":
        return _median(base_samples), _median(opt_samples)
    if metric in MEMORY_METRICS:  # the median call peak of each side (bench.measure.memory)
        peaks = [r.memory.call_peaks_mb if r.memory is not None else [] for r in (baseline, optimized)]
        return _median(peaks[0]), _median(peaks[1])
    if metric in QUALITY_METRICS:  # the mean reading of each side (bench.measure.quality)
        means = [_mean(r.quality.readings) if r.quality is not None else None for r in (baseline, optimized)]
        return means[0], means[1]
    b, o = baseline.generation, optimized.generation
    if b is None or o is None:
        return None, None
    if metric == "throughput":
        return b.tokens_per_s, o.tokens_per_s
    name, _, q = metric.partition("_")
    stats = [getattr(g, f"{name}_ms") or {} for g in (b, o)]
    return stats[0].get(q or "median"), stats[1].get(q or "median")


def _round_ratios(baseline: VariantResult, optimized: VariantResult, basis: str) -> list[float]:
    """Each round's ratio of medians on ``basis`` when both sides were measured in the same rounds (at least 2;
    bench.isolate.rounds), else []."""
    sides = [r.batch if basis == "batch" else r.timing for r in (baseline, optimized)]
    if any(t is None or not t.rounds or len(t.rounds) < 2 for t in sides):
        return []
    split = [split_rounds(t.samples_ms, t.rounds) for t in sides if t is not None and t.rounds]
    if len(split[0]) != len(split[1]):
        return []
    return round_ratios(split[0], split[1])


def _energy_ratio(baseline: VariantResult, optimized: VariantResult) -> tuple[float | None, ...]:
    """(baseline / optimized energy per call, its 95 % interval) when both sides measured it: the speedup's
    bootstrap over each side's per-segment samples, widened by the run-to-run spread of an energy median."""
    b = baseline.energy.samples_mj if baseline.energy else []
    o = optimized.energy.samples_mj if optimized.energy else []
    if not b or not o:
        return None, None, None
    ratio = _median(b) / _median(o)  # type: ignore[operator]
    interval = speedup_interval(b, o, ENERGY_RUN_NOISE)
    return (ratio, *interval) if interval is not None else (ratio, None, None)


def _speedup(
    baseline: VariantResult, optimized: VariantResult, base_samples: list[float], opt_samples: list[float],
    same_hardware: bool, bootstrap: bool = True,
) -> tuple[float | None, float | None, float | None, str]:  # fmt: skip
    """(speedup, its 95 % interval's low and high, the metric it is on): none across GPU models. ``bootstrap``
    False: no interval for a time (its rounds give it)."""
    speedup = low = high = None
    b, o = _median(base_samples), _median(opt_samples)
    noise = _run_noise(optimized)
    if b is not None and o is not None and o > 0 and b > 0 and same_hardware:  # a median <= 0: no work seen
        speedup = b / o
        interval = speedup_interval(base_samples, opt_samples, noise) if bootstrap else None
        if interval is not None:
            low, high = interval
    metric = "time"
    by_memory = memory_ratio(baseline, optimized) if same_hardware else None
    if by_memory is not None:  # a pair whose benefit is memory: its peaks, not its time
        return by_memory
    by_quality = quality_ratio(baseline, optimized) if same_hardware else None  # a score or error, not a time
    if by_quality is not None:
        return by_quality
    if same_hardware and optimized.generation is not None:  # token generation: the metric the pair names
        from bench.measure.generation import pair_interval, pair_speedup

        speedup, metric = pair_speedup(baseline, optimized, speedup)
        if metric != "time":
            low, high = pair_interval(baseline, optimized, metric, noise) or (None, None)
    return speedup, low, high, metric


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


def unjudged(baseline: VariantResult, optimized: VariantResult, exc: BaseException) -> Comparison:
    """A pair whose comparison raised ``exc`` (a fault of perflab's, not of the variants'): recorded as failed with
    its medians and the error, so that the suite's other pairs are compared and every result is kept."""
    s = optimized.spec
    return Comparison(chapter=s.chapter, example=s.example, variant=s.variant, baseline_status=baseline.status,
                      optimized_status=optimized.status, baseline_median_ms=baseline.median_ms,
                      optimized_median_ms=optimized.median_ms, status="failed",
                      verification=Verification(verified=False, detail=f"the comparison failed (perflab's fault, "
                                                f"please report it): {type(exc).__name__}: {exc}"))  # fmt: skip


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _median(samples: list[float]) -> float | None:
    import statistics

    return statistics.median(samples) if samples else None


def _gpu(result: VariantResult) -> str | None:
    """The model name of the GPU in the variant's manifest; None on the CPU."""
    gpu = result.manifest.get("gpu")
    value = gpu.get("name") if isinstance(gpu, dict) else None
    return str(value) if value else None


def _verify(baseline: VariantResult, optimized: VariantResult, verify: Verifier | None = None) -> Verification:
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
        return Verification(verified=False, detail=f"no output from {missing} ({_no_output(baseline, optimized)}): "
                            "not verified")  # fmt: skip
    work = _work_differs(baseline, optimized)
    if work:
        return Verification(verified=False, outcome="mismatch", detail=work)
    modes = [r.config.get("verify", "exact") for r in (baseline, optimized)]
    if modes[0] != modes[1]:
        return Verification(
            verified=False,
            outcome="mismatch",
            detail=f"the sides are verified differently: baseline verify={modes[0]!r}, optimized {modes[1]!r}; "
            "both sides of a pair declare the same (get_config())",
        )
    if modes[0] == "quality":  # a lossy pair: its outputs differ by design, its quality is held to its floor
        return verify_quality(baseline, optimized)
    assert baseline.output is not None and optimized.output is not None
    pairs = [_files(baseline.output, optimized.output)]
    fresh = [r.recheck.fresh if r.recheck else None for r in (baseline, optimized)]
    if fresh[0] is not None and fresh[1] is not None:
        pairs.append(_files(fresh[0], fresh[1]))
    rtol = optimized.config.get("rtol")
    if verify is None:
        results = verify_all(pairs, rtol, modes[0])
    else:
        results = verify(pairs, rtol, BenchmarkConfig(**optimized.config).stage_limit("check"), modes[0])
    main = results[0]
    if not main.verified:
        return _unrepeated(main, baseline, optimized)
    if len(results) == 1:
        why = _why_not_rechecked(baseline, optimized)
        return main.model_copy(update={"detail": f"{main.detail}; {why}"})
    again = results[1]
    if not again.verified:
        return _unrepeated(again.model_copy(
            update={
                "detail": "outputs match on the set-up inputs but not once the inputs were changed (a cached or "
                f"precomputed result?): {again.detail}"
            }
        ), baseline, optimized)  # fmt: skip
    return main.model_copy(update={"detail": f"{main.detail}; again on changed inputs ({again.detail})"})


def _unrepeated(verification: Verification, baseline: VariantResult, optimized: VariantResult) -> Verification:
    """A mismatch of outputs, with the side(s) whose output a call more on the same inputs did not repeat named
    (bench.isolate.timed._repeat): a call that draws unseeded random numbers or depends on how often it ran differs
    from the other side whatever it computes. Anything else unchanged."""
    sides = [(name, r.output) for name, r in (("baseline", baseline), ("optimized", optimized))
             if r.output is not None and r.output.repeated is False]  # fmt: skip
    if verification.outcome != "mismatch" or not sides:
        return verification
    diffs = [f"{o.repeat_max_abs_diff:.3g}" for _, o in sides if o.repeat_max_abs_diff is not None]
    diff = f" (max abs diff {' and '.join(diffs)})" if len(diffs) == len(sides) else ""
    if len(sides) == 1:
        what = (f"the {sides[0][0]} side's output differs between two calls on the same inputs{diff}: its call draws "
                "new random numbers each time or depends on how often it ran (a counter, a generator); draw random "
                "values in setup(), seeded, or make the output a function of the inputs")  # fmt: skip
    else:
        what = (f"both sides' outputs differ between two calls on the same inputs{diff}: their calls draw new random "
                "numbers each time or depend on how often they ran (a counter, a generator); draw random values in "
                "setup(), seeded, or make the outputs functions of the inputs")  # fmt: skip
    return verification.model_copy(update={"detail": f"{verification.detail}; {what}"})


def _no_output(*sides: VariantResult) -> str:
    """Why a side has no output, in the words of what its ``benchmark_fn()`` returned."""
    kinds = {r.output.returned for r in sides if r.output is not None and r.output.path is None}
    if "NoneType" in kinds:
        return ("benchmark_fn() returned None: a call writing in place returns the tensor it writes, or get_output() "
                "returns it")  # fmt: skip
    number = sorted(kinds & {"float", "int", "bool", "complex"})
    if number:
        return (f"benchmark_fn() returned a Python {number[0]}, which is not compared (a loss.item() would be held "
                "to float64's tolerance): return it as a tensor, or the tensor it came from")  # fmt: skip
    if kinds - {None}:
        return f"benchmark_fn() returned a {sorted(kinds - {None})[0]}, holding no tensor or NumPy array"
    return "no get_output() and benchmark_fn() returned no tensor or NumPy array, or get_output() returned None"


def _files(a: Any, b: Any) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
    return (a.path, [t.model_dump() for t in a.tensors]), (b.path, [t.model_dump() for t in b.tensors])


def _why_not_rechecked(baseline: VariantResult, optimized: VariantResult) -> str:
    for name, r in (("baseline", baseline), ("optimized", optimized)):
        if not r.config.get("check_inputs", True):
            return f"not checked on changed inputs ({name}: check_inputs is off)"
        if r.recheck is None or r.recheck.fresh is None:
            if r.recheck is not None and r.recheck.perturbed == 0:
                return (f"not checked on changed inputs ({name} has no floating input tensor: none set up in setup(), "
                        "none a benchmark function reads)")  # fmt: skip
            return f"not checked on changed inputs ({name} made no such call)"
    return "not checked on changed inputs"


def _work_differs(baseline: VariantResult, optimized: VariantResult) -> str | None:
    """Both sides of a pair do the same work (INTEGRITY #4): declared work counts must agree (the precision
    they run at, ``dtype``, may differ: that is what a precision pair changes; so may a stated ceiling, which
    each side computes from rates it measured itself)."""
    own = {"dtype", *Work.STATED}
    b = baseline.work.model_dump(exclude_none=True, exclude=own) if baseline.work else {}
    o = optimized.work.model_dump(exclude_none=True, exclude=own) if optimized.work else {}
    if b != o:
        return (
            f"declared work differs: baseline {b or 'none'} vs optimized {o or 'none'}; both sides of a pair do "
            "the same work and declare it alike (get_work())"
        )
    return None
