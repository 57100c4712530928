"""An example measured in interleaved rounds: which variants run in each round, when to stop, the merged results.

Baseline fully, then optimized fully, makes whatever changed on the host in between the speedup: on the busy
2-core host an A/A pair read 0.84x [0.74, 0.98] "slower". So a worker (bench.isolate.workers) runs an example
round by round, each variant in a fresh child in every round, file order in even rounds and reversed in odd ones
(B O, O B, B O: a drift linear in time hits both sides alike over two rounds). Round 0 runs each variant in full
(set-up, warm-up, measurement, output check, batch, energy, recheck, profile); later rounds time only: a fresh
child sets up, warms up and measures, then ends (the job's ``timing_only``; recheck, energy and the NaN poison
off; the batch only where a pair's speedup is on it).

After each round every pair's interval over its rounds (bench.measure.rounds) says whether it needs more: at least
``min_rounds``, then until it is within ±``speedup_precision``, clearly decided or within ±``noise_threshold``
(equivalent), at most ``max_rounds``, and no round begun that would end past ``max_rounds_seconds`` of the example's
rounds (below ``min_rounds`` the limit stretched ``TIME_LIMIT_STRETCH`` times: then two may be all); each setting
from the pair's optimized variant's effective config. A token-generating pair (TTFT, TPOT, throughput) runs in
rounds alike, its ratios each round's on its metric (``generation_ratios``). A settled pair, or one whose side
failed, takes no further part; the baseline runs while any pair goes on. A host-clocked round first reads the free
cores and caps its children's intra-op threads to them (bench.measure.cores), the same cap for both sides.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.define.config import KEEP_SETUP_S, TIMING_ONLY, BenchmarkConfig, host_clocked
from bench.define.discovery import Example
from bench.define.result import Comparison, VariantResult, VariantSpec
from bench.isolate.kept import Kept
from bench.measure.compare import compare, noise_threshold, unjudged
from bench.measure.cores import cap_note, free_cores
from bench.measure.rounds import decide, round_ratios
from bench.measure.stats import summarize

TIME_LIMIT_STRETCH = 2.0  # below min_rounds, max_rounds_seconds is stretched this many times before it stops a pair
BUSY_FLAG = "host busy:"  # a measurement's flag where other processes took the host's CPU (bench.isolate.timed)

@dataclass
class Rounds:
    """One example's rounds: ``start()`` the next, ``add()`` each child's result, ``results()`` at the end."""

    example: Example
    pre: BenchmarkConfig  # the suite's and CLI's layers (round 0 knows no more)
    index: int = 0  # the example's in the suite
    device: str | None = None  # the device the example's variants run on, once round 0 said
    number: int = -1  # the round in progress
    done: bool = False
    t0: float = field(default_factory=time.monotonic)
    by_key: dict[str, list[VariantResult]] = field(default_factory=dict)  # each variant's rounds, in order
    stops: dict[str, str] = field(default_factory=dict)  # an optimized variant's key: why its pair is settled
    waiting: set[str] = field(default_factory=set)  # this round's variants not yet finished
    threads: dict[str, Any] = field(default_factory=dict)  # this round's job extras: its threads cap
    kept: dict[str, Kept] = field(default_factory=dict)  # each variant's child parked between rounds (round_children)
    keeping: bool | None = None  # whether later rounds resume the parked children: decided after round 0

    def start(self, fresh: bool = True) -> list[VariantSpec]:
        """The next round's variants, in the round's order; the round's thread cap read first (``fresh=False``:
        the latest reading of the free cores, taken while no child of the worker ran)."""
        self.number += 1
        specs = [s for s in self.example.variants if s.is_baseline or s.key not in self.stops]
        if self.number % 2:
            specs.reverse()
        self.waiting = {s.key for s in specs}
        self.threads = self._cap(fresh)
        return specs

    def job(self, spec: VariantSpec) -> dict[str, Any]:
        """Extras for the job of ``spec``'s child in this round (runner's ``job_extra``): a child of round 0 is asked
        to ``keep`` (park after its round) unless ``round_children`` is "fresh" or one round is all; a later round's
        child gets the steady state ``spec``'s round 0 warmed up to (``steady_ms``: one window near it is steady)."""
        keep = self.number == 0 and self.pre.round_children != "fresh" and not self.final()
        first = self.by_key.get(spec.key, [None])[0] if self.number else None
        steady = first.timing.warmup_steady_ms if first is not None and first.timing is not None else None
        return {**self.threads, **({"timing_only": True} if self.number else {}), **({"keep": True} if keep else {}),
                **({"steady_ms": steady} if steady else {})}  # fmt: skip

    def resume(self, spec: VariantSpec) -> Kept | None:
        """The parked child that times ``spec`` in this round, or None (a fresh child does)."""
        kept = self.kept.get(spec.key) if self.number and self.keeping else None
        return kept if kept is not None and kept.alive else None

    def order(self) -> dict[str, Any]:
        """A parked child's order for this round (bench.isolate.kept): its number; whether the batch runs (where a
        speedup of the example is on it, as ``layer`` says for a fresh child)."""
        batch = any(r[0].config.get("speedup_time") == "batch" for r in self.by_key.values() if r)
        return {"round": self.number, "batch": batch}

    def release(self) -> list[Kept]:
        """After a complete round: the parked children no round needs any more (every one once the example is done
        or later rounds take fresh children, a settled pair's optimized side), taken out of ``kept``."""
        if self.number == 0 and self.kept:
            self.keeping = not self.done and self._keeps()
        gone = [k for k, c in self.kept.items() if self.done or not self.keeping or k in self.stops or not c.alive]
        return [self.kept.pop(k) for k in gone]

    def _keeps(self) -> bool:
        """Whether the children parked after round 0 time the later rounds: ``round_children`` ("auto": where a
        fresh child of the slowest variant would pay KEEP_SETUP_S or more again, ``repaid_s``), within half the
        device's memory."""
        firsts = [r[0] for r in self.by_key.values() if r]
        how = {f.config.get("round_children", "auto") for f in firsts}
        if "fresh" in how or len(self.kept) < len(firsts):
            return False  # a variant whose child did not park (ranks, a generation) leaves the pair to fresh ones
        total = next((k.total_mb for k in self.kept.values() if k.total_mb), None)
        if total is not None and sum(k.held_mb for k in self.kept.values()) > total / 2:
            return False
        return how == {"kept"} or max(map(repaid_s, firsts)) >= KEEP_SETUP_S

    def kill_kept(self) -> None:
        """Every parked child at once (an interrupted suite, a worker's fault)."""
        for kept in self.kept.values():
            kept.kill()
        self.kept.clear()

    def layer(self, cli: Any) -> Any:
        """The CLI layer for this round's children: a later round's checks off."""
        if not self.number:
            return cli
        from bench.define.config import explicit_fields

        batch = any(r[0].config.get("speedup_time") == "batch" for r in self.by_key.values() if r)
        return {**explicit_fields(cli), **TIMING_ONLY, **({} if batch else {"measure_batch": False})}

    def _cap(self, fresh: bool) -> dict[str, Any]:
        config = next((r[0].config for r in self.by_key.values() if r), None)
        device = self.device or ("cpu" if self.pre.device == "cpu" else None)
        if config is None and device is None:
            from bench.isolate.process import cuda_guess

            device = None if cuda_guess()[0] else "cpu"
        if not host_clocked(BenchmarkConfig(**config) if config else self.pre, device):
            return {}
        seen = free_cores(fresh=fresh)
        if seen is None:
            return {}
        free, usable, busy = seen
        return {"threads": free, "threads_note": cap_note(free, usable, busy)} if free < usable else {}

    def final(self) -> bool:
        """This round is the example's last whatever its results say (max_rounds reached, or one round only)."""
        configs = [r[0].config for r in self.by_key.values() if r] or [self.pre.model_dump()]
        return self.number + 1 >= max(c.get("max_rounds", 1) for c in configs) or not self.example.optimized

    def add(self, spec: VariantSpec, result: VariantResult) -> bool:
        """One child's result; True when its round is complete (then ``done`` says whether another follows)."""
        self.by_key.setdefault(spec.key, []).append(result)
        if self.device is None and result.device:
            self.device = result.device
        if result.status != "ok" and not spec.is_baseline:
            self.stops.setdefault(spec.key, f"optimized {result.status} in round {self.number}")
        self.waiting.discard(spec.key)
        if self.waiting:
            return False
        self.done = self._decide()
        return True

    def _decide(self) -> bool:
        """After a complete round: whether the example is done (every pair settled)."""
        base = self.example.baseline
        base_rounds = self.by_key.get(base.key, []) if base else []
        if not base_rounds or base_rounds[-1].status != "ok":
            for s in self.example.optimized:
                self.stops.setdefault(s.key, f"baseline {base_rounds[-1].status if base_rounds else 'missing'}")
            return True
        spent = time.monotonic() - self.t0
        for s in self.example.optimized:
            if s.key in self.stops:
                continue
            why = self._settled(base_rounds, self.by_key[s.key], spent)
            if why is not None:
                self.stops[s.key] = why
        return all(s.key in self.stops for s in self.example.optimized)

    def _settled(self, base: list[VariantResult], opt: list[VariantResult], spent: float) -> str | None:
        """Why the pair of these rounds needs no more (max_rounds reached, a decision, the time limit), or None."""
        cfg, n = opt[0].config, len(opt)
        if n >= cfg.get("max_rounds", 1):
            return "max_rounds"  # first: all its rounds ran, nothing stopped early (its interval at FULL_LEVEL)
        calm = undisturbed(base[:n], opt)
        if len(calm) >= cfg.get("min_rounds", 1):
            b, o = [base[i] for i in calm], [opt[i] for i in calm]
            ratios = generation_ratios(b, o)
            if ratios is None:
                ratios = round_ratios(*[[r.timing.samples_ms if r.timing else [] for r in side] for side in (b, o)])
            why = decide(ratios, cfg.get("speedup_precision", 0.02), noise_threshold(cfg))
            if why is not None:
                return why
        projected, limit = spent * (1 + 1 / (self.number + 1)), cfg.get("max_rounds_seconds", float("inf"))
        if n >= 2 and projected > limit and (n >= cfg.get("min_rounds", 1) or projected > TIME_LIMIT_STRETCH * limit):
            # Another round, as long as the average so far, would run past the limit. Below min_rounds the limit
            # stretches to TIME_LIMIT_STRETCH times itself: two rounds give an interval of 1 degree of freedom,
            # t = 12.7 (serving pairs whose two rounds read 2.9x and 5.3x faster gave [0.03, 448], "no significant
            # difference"); only a pair of calls so slow that a third round would pass that stops at two (B O, O B:
            # a linear drift still cancels).
            return "time_limit"
        return None

    def results(self) -> list[VariantResult]:
        """Each variant's result over its rounds (``merge``), in file order."""
        return [merge(self.by_key[s.key]) for s in self.example.variants if s.key in self.by_key]

    def compare(self, verify: Any) -> list[Comparison]:
        """Each optimized variant against the baseline of the same rounds."""
        base = self.example.baseline
        if base is None or base.key not in self.by_key:
            return []
        out = []
        for s in self.example.optimized:
            opt = self.by_key.get(s.key)
            if not opt:
                continue
            stop = self.stops.get(s.key) if len(opt) > 1 else None
            base_rounds = self.by_key[base.key][: len(opt)]
            calm = undisturbed(base_rounds, opt)
            generated = generation_ratios(*[[side[i] for i in calm] for side in (base_rounds, opt)])
            b, o = merge(base_rounds, calm), merge(opt, calm)
            try:
                c = compare(b, o, verify=verify, rounds_stop=stop, metric_rounds=generated if len(opt) > 1 else None)
                out.append(c.model_copy(update={"rounds_left_out": sorted(set(range(len(opt))) - set(calm))}))
            except Exception as exc:  # noqa: BLE001 - a fault of the comparison's: the pair recorded, the suite runs on
                out.append(unjudged(b, o, exc))
        return out


def undisturbed(base: list[VariantResult], opt: list[VariantResult]) -> list[int]:
    """The rounds a pair's speedup is taken over: those in which neither side's measurement saw other processes take
    the host (``BUSY_FLAG``; a variant's own workers are its own time), where two or more remain; else every round (a
    host busy throughout: its spread is in the interval). One starved round of a 146 µs call (29 ms) pulled a busy
    host's rounds to 0.19x beside equal medians; left out, the pair runs on until ``min_rounds`` calm rounds (within
    max_rounds and the time limit). The load is the host's, not the variant's: leaving it out picks no side. The
    optimized side's ``busy_rounds`` "keep": every round."""
    n = min(len(base), len(opt))
    if not n or opt[0].config.get("busy_rounds", "leave_out") == "keep":
        return list(range(n))
    calm = [i for i in range(n) if not (_busy(base[i]) or _busy(opt[i]))]
    return calm if len(calm) >= 2 else list(range(n))


def _busy(result: VariantResult) -> bool:
    return result.timing is not None and any(f.startswith(BUSY_FLAG) for f in result.timing.machine_flags)


def generation_ratios(base: list[VariantResult], opt: list[VariantResult]) -> list[float] | None:
    """Each round's speedup on a token-generating pair's metric (TTFT, TPOT or throughput: the optimized side's
    ``speedup_metric``), round by round; None for a pair on time (or a round without the metric on a side). The
    generations of both sides in the same rounds, so that load which comes and goes hits both (one child a side
    read identical code's TTFT 0.54x [0.28, 0.65] on a busy 2-core host)."""
    from bench.measure.generation import pair_speedup

    if not opt or opt[0].generation is None or opt[0].generation.speedup_metric == "time":
        return None
    ratios = []
    for b, o in zip(base, opt, strict=False):
        if b.status != "ok" or o.status != "ok":
            return None
        ratio, metric = pair_speedup(b, o, None)
        if ratio is None or metric == "time" or ratio <= 0:
            return None
        ratios.append(ratio)
    return ratios


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
        update["timing"] = _pooled(first.timing, timings, first.config)
    batches = [r.batch for r in kept]
    if first.batch is not None and all(b is not None for b in batches):
        update["batch"] = _pooled(first.batch, batches, first.config)
    generations = [r.generation for r in kept]
    if first.generation is not None and all(g is not None and g.ttft_samples_ms for g in generations):
        update["generation"] = _pooled_generation(first.generation, generations)
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


def _pooled(first: Any, parts: list[Any], config: dict[str, Any]) -> Any:
    """A Timing (or BatchTiming) of every round's samples, in order, with each round's count; its noise the worst
    round's, as its target is met only where every round met it (round 0's alone was logged, ``timing_noise_pct``);
    its stop reason each round's where they differ, by count ("noise_target 2, max_time 1")."""
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
        flags = list(dict.fromkeys(f for p in parts for f in p.machine_flags))
        update["machine_flags"] = flags
        update["target_met"] = all(p.target_met for p in parts) if first.target_met is not None else None
    return first.model_copy(update=update)


def repaid_s(first: VariantResult) -> float:
    """What a fresh child of ``first``'s variant pays again before its steady state, in seconds: round 0's start-up
    and set-up, and its first call beyond a steady one (a compile, an autotune, pinned memory allocated: a
    10 s first call of a 0.5 s one on the H200, in a fresh child every round). A fresh interpreter's start-up
    (``--cold-start``: Python and torch imported, ~2.6 s) is the launch's price, not the variant's: left out, or
    every cold pair would keep its two processes, and their offset (1.3 against 2.5 ms for one softmax on the 2-core
    host) would read as a verdict (an A/A pair 0.63x [0.47, 0.85])."""
    cold = (first.launch or "").startswith("cold_start")
    names = ("setup",) if cold else ("startup", "setup")
    stages = sum(s.duration_s or 0.0 for s in first.stages if s.name in names)
    t = first.timing
    excess = (t.first_call_ms - t.stats.median_ms) / 1e3 if t is not None and t.first_call_ms else 0.0
    return stages + max(excess, 0.0)
