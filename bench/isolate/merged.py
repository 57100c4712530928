"""One variant's result over its interleaved rounds (bench.isolate.rounds): every round's samples pooled in one
timing, each round's count kept, so that a pair's speedup can be taken round by round; a token-generating variant's
generations and a memory pair's readings pooled likewise."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.define.result import VariantResult
from bench.measure.hostspeed import slow_rounds_note
from bench.measure.stats import summarize


def merge(rounds: list[VariantResult], timed: list[int] | None = None) -> VariantResult:
    """One variant's result over its rounds: the first round's (checks, outputs, profile), its timing holding
    every round's samples in order (``Timing.rounds``: each round's count; ``timed``: those rounds' alone, a pair's
    ``undisturbed``); a round that failed is the variant's result, its error naming the round."""
    first = rounds[0]
    failed = next((i for i, r in enumerate(rounds) if r.status != "ok"), None)
    if failed is not None:
        bad = rounds[failed]
        if failed and bad.error is not None:
            bad = bad.model_copy(update={"error": bad.error.model_copy(
                update={"message": f"round {failed} of {len(rounds)}: {bad.error.message}"})})  # fmt: skip
        return bad
    if len(rounds) == 1:
        return first
    update: dict[str, Any] = {"elapsed_s": sum(r.elapsed_s for r in rounds), "stages": _summed_stages(rounds)}
    kept = [rounds[i] for i in timed] if timed is not None else rounds
    timings = [r.timing for r in kept]
    if first.timing is not None and all(t is not None for t in timings):
        update["timing"] = _pooled(first.timing, timings, first.config, timed)
    batches = [r.batch for r in kept]
    if first.batch is not None and all(b is not None for b in batches):
        update["batch"] = _pooled(first.batch, batches, first.config)
    generations = [r.generation for r in kept]
    if first.generation is not None and all(g is not None and g.ttft_samples_ms for g in generations):
        update["generation"] = _pooled_generation(first.generation, generations)
    memories = [r.memory for r in kept]
    if first.memory is not None and all(m is not None and m.call_peaks_mb for m in memories):
        update["memory"] = _pooled_memory(first.memory, memories)
    return first.model_copy(update=update)


def _pooled_memory(first: Any, parts: list[Any]) -> Any:
    """A memory pair's variant's readings over its rounds (each round's child reads its call peaks on a GPU:
    bench.measure.memory): the call peaks of every round, in order; each size the largest a round read; a variant of
    several ranks, each rank's call peaks over the rounds and its largest peak."""
    update: dict[str, Any] = {"call_peaks_mb": [x for m in parts for x in m.call_peaks_mb]}
    for key in ("peak_mb", "allocated_mb", "reserved_mb", "rss_peak_mb"):
        values = [getattr(m, key) for m in parts if getattr(m, key) is not None]
        if values:
            update[key] = max(values)
    if all(len(m.rank_call_peaks_mb) == len(first.rank_call_peaks_mb) for m in parts) and first.rank_call_peaks_mb:
        update["rank_call_peaks_mb"] = [[x for m in parts for x in m.rank_call_peaks_mb[i]]
                                        for i in range(len(first.rank_call_peaks_mb))]  # fmt: skip
    if all(len(m.rank_peak_mb) == len(first.rank_peak_mb) for m in parts) and first.rank_peak_mb:
        update["rank_peak_mb"] = [max(m.rank_peak_mb[i] for m in parts) for i in range(len(first.rank_peak_mb))]
    return first.model_copy(update=update)


def _pooled_generation(first: Any, parts: list[Any]) -> Any:
    """A token-generating variant's generations over its rounds, pooled as one child's are (bench.measure.generation's
    ``summarize``): TTFT, TPOT and ITL over every round's requests and tokens, the rates over every round's
    generations (requests/s from tokens/s: each generation emits the same tokens, as the output check holds); the
    step times, kept as statistics only, each statistic's median over the rounds. Round 0's alone put 3,064 → 3,011
    tokens/s beside a speedup of 1.10x (its rounds' ratios 0.98, then 1.08-1.15) in chapter 15's table."""
    import numpy as np

    from bench.measure.generation import quantiles

    ttft = [row for g in parts for row in g.ttft_samples_ms]
    tpot = [row for g in parts for row in g.tpot_samples_ms]
    itl = [row for g in parts for row in g.itl_samples_ms]
    rates = [x for g in parts for x in g.tokens_per_s_samples]
    flat_tpot = [v for row in tpot for v in row if v is not None]
    flat_itl = [v for row in itl for v in row]
    rate = float(np.median(rates)) if rates else first.tokens_per_s
    per_token = first.requests / first.tokens if first.tokens else None
    return first.model_copy(update={
        "samples": sum(g.samples for g in parts), "steps": int(np.median([g.steps for g in parts])),
        "ttft_ms": quantiles([v for row in ttft for v in row]), "tpot_ms": quantiles(flat_tpot) if flat_tpot else None,
        "itl_ms": quantiles(flat_itl) if flat_itl else None,
        "step_ms": {k: float(np.median([g.step_ms[k] for g in parts])) for k in first.step_ms},
        "tokens_per_s": rate, "requests_per_s": rate * per_token if rates and per_token else first.requests_per_s,
        "idle_ms": float(np.median([g.idle_ms for g in parts])), "ttft_samples_ms": ttft, "tpot_samples_ms": tpot,
        "itl_samples_ms": itl, "tokens_per_s_samples": rates})  # fmt: skip


def _summed_stages(rounds: list[VariantResult]) -> list[Any]:
    """The first round's stage records, each stage's time summed over every round that ran it (where the time went:
    a later round's start-up and measurement cost as much as the first's)."""
    spent: dict[str, float] = {}
    for r in rounds:
        for s in r.stages:
            if s.duration_s is not None:
                spent[s.name] = spent.get(s.name, 0.0) + s.duration_s
    return [s.model_copy(update={"duration_s": spent.get(s.name, s.duration_s)}) for s in rounds[0].stages]


def _pooled(first: Any, parts: list[Any], config: dict[str, Any], numbers: list[int] | None = None) -> Any:
    """A Timing (or BatchTiming) of every round's samples, in order, with each round's count; its noise the worst
    round's, as its target is met only where every round met it (round 0's alone was logged, ``timing_noise_pct``);
    its stop reason each round's where they differ, by count ("noise_target 2, max_time 1"). A Timing also keeps each
    round's host CPU reference (``host_ref_ms``; ``numbers``: the rounds' numbers) and names a round whose reference
    ran slow (bench.measure.hostspeed)."""
    samples = [x for p in parts for x in p.samples_ms]
    notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    noises = [p.noise for p in parts if p.noise is not None]
    stops = Counter(p.stop_reason for p in parts if p.stop_reason)  # "noise_target 2, max_time 1" where they differ
    update: dict[str, Any] = {"samples_ms": samples, "rounds": [len(p.samples_ms) for p in parts], "notes": notes,
                              "stats": summarize(samples, config.get("percentiles") or [50.0]),
                              "noise": max(noises) if noises else None,
                              "stop_reason": (", ".join(f"{r} {n}" for r, n in stops.most_common()) if len(stops) > 1
                                              else first.stop_reason)}  # fmt: skip
    if hasattr(first, "threads"):
        threads = [t for p in parts for t in (p.threads or [])]
        update["threads"] = threads or None
        update["round_warmup_calls"] = [p.warmup_calls for p in parts]
        during = [p.host_ref_during_ms for p in parts]
        update["host_ref_during_ms"] = [x for d in during for x in d] if all(during) else None
        if len(set(threads)) > 1:
            update["notes"] = [*notes, mixed_threads_note(threads)]
        update["host_ref_ms"] = refs = [p.host_ref_ms[0] if p.host_ref_ms else [] for p in parts]
        if slow := slow_rounds_note(refs, numbers):
            update["notes"] = [*update["notes"], slow]
        flags = list(dict.fromkeys(f for p in parts for f in p.machine_flags))
        update["machine_flags"] = flags
        update["target_met"] = all(p.target_met for p in parts) if first.target_met is not None else None
    return first.model_copy(update=update)


def mixed_threads_note(threads: list[int]) -> str:
    """The note of a host-clocked variant whose rounds ran at different intra-op thread counts (``Timing.threads``,
    round by round): the free cores at each round's start differed (bench.measure.cores)."""
    return (
        f"rounds ran at different intra-op thread counts ({', '.join(map(str, threads))}, round by round: the cores "
        "other processes left free at each round's start); a pair's two sides are given one cap a round, so each "
        "round's ratio compares like with like, but this timing pools samples taken at different counts"
    )
