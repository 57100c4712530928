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
from the pair's optimized variant's effective config. A token-generating pair (TTFT, TPOT, throughput) and a memory
pair (its peak) run in rounds alike, their ratios each round's on their metric (``metric_ratios``). A settled pair, or
one whose side failed, takes no further part; the baseline runs while any pair goes on. A host-clocked round first
reads the free cores and caps its children's intra-op threads to them (bench.measure.cores), the same cap for both
sides; where round 0's children are kept, they hold round 0's cap, and every later round takes it too (a fresh child
standing in for a kept one as well), so a round's two sides always share one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench.define.config import KEEP_SETUP_S, TIMING_ONLY, BenchmarkConfig, host_clocked
from bench.define.discovery import Example
from bench.define.result import Comparison, VariantResult, VariantSpec
from bench.isolate.kept import Kept
from bench.isolate.merged import merge
from bench.measure.compare import compare, noise_threshold, unjudged
from bench.measure.cores import cap_note, free_cores
from bench.measure.rounds import decide, round_ratios

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
    threads: dict[str, Any] = field(default_factory=dict)  # this round's job extras: its threads cap, both sides
    kept: dict[str, Kept] = field(default_factory=dict)  # each variant's child parked between rounds (round_children)
    keeping: bool | None = None  # whether later rounds resume the parked children: decided after round 0
    keep_note: str | None = None  # where they take fresh children instead, why (``fresh_note``): decided with it

    def start(self, fresh: bool = True) -> list[VariantSpec]:
        """The next round's variants, in the round's order; the round's thread cap read first (``fresh=False``:
        the latest reading of the free cores, taken while no child of the worker ran), round 0's kept where its
        children time the later rounds."""
        self.number += 1
        specs = [s for s in self.example.variants if s.is_baseline or s.key not in self.stops]
        if self.number % 2:
            specs.reverse()
        self.waiting = {s.key for s in specs}
        if not (self.number and self.keeping):  # kept children hold round 0's cap: this round's is round 0's
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
        if self.number == 0 and not self.done:
            self.keeping = self._keeps()  # none parked ("fresh", ranks): False, and why
        gone = [k for k, c in self.kept.items() if self.done or not self.keeping or k in self.stops or not c.alive]
        return [self.kept.pop(k) for k in gone]

    def _keeps(self) -> bool:
        """Whether the children parked after round 0 time the later rounds: ``round_children`` ("auto": where a
        fresh child of the slowest variant would pay KEEP_SETUP_S or more again, ``repaid_s``), within half the
        device's memory. Where not, ``keep_note`` says why."""
        firsts = [r[0] for r in self.by_key.values() if r]
        how = {f.config.get("round_children", "auto") for f in firsts}
        setting = "fresh" if "fresh" in how else "kept" if how == {"kept"} else "auto"
        if "fresh" in how:
            self.keep_note = fresh_note(setting)
            return False
        if len(self.kept) < len(firsts):  # a variant whose child did not park (ranks) leaves the pair to fresh ones
            unparked = [r[0].spec.variant for k, r in self.by_key.items() if r and k not in self.kept]
            self.keep_note = fresh_note(setting, f"a child did not park ({', '.join(unparked)})")
            return False
        total = next((k.total_mb for k in self.kept.values() if k.total_mb), None)
        held = sum(k.held_mb for k in self.kept.values())
        if total is not None and held > total / 2:
            self.keep_note = fresh_note(setting, f"parked children would hold {held:,.0f} of {total:,.0f} MiB, over "
                                        "half the device's")  # fmt: skip
            return False
        slowest = max(firsts, key=repaid_s)
        repaid = repaid_s(slowest)
        if how == {"kept"} or repaid >= KEEP_SETUP_S:
            return True
        self.keep_note = fresh_note(setting, f"round 0's {repaid_parts(slowest)} came to {repaid:.2f} s (slowest "
                                    f"variant, {slowest.spec.variant}), under the {KEEP_SETUP_S:g} s a kept child "
                                    "would save")  # fmt: skip
        return False

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
            ratios, on = metric_ratios(b, o), metric_of(o[0])
            if ratios is None:
                times = [[r.timing.samples_ms if r.timing else [] for r in side] for side in (b, o)]
                ratios, on = round_ratios(*times), "time"
            why = decide(ratios, cfg.get("speedup_precision", 0.02), noise_threshold(cfg, on))
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
        """Each variant's result over its rounds (``merge``), in file order; one of several rounds whose later ones
        took fresh children with ``keep_note`` in its timing's notes (a kept child's note is its own: KEPT_NOTE)."""
        out = []
        for s in self.example.variants:
            rounds = self.by_key.get(s.key)
            if not rounds:
                continue
            result = merge(rounds)
            t, note = result.timing, self.keep_note
            if note and len(rounds) > 1 and t is not None and note not in t.notes:
                result = result.model_copy(update={"timing": t.model_copy(update={"notes": [*t.notes, note]})})
            out.append(result)
        return out

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
            generated = metric_ratios(*[[side[i] for i in calm] for side in (base_rounds, opt)])
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


def metric_ratios(base: list[VariantResult], opt: list[VariantResult]) -> list[float] | None:
    """Each round's speedup on the metric a pair names other than a time, round by round: a token-generating pair's
    TTFT, TPOT or throughput (the optimized side's ``speedup_metric``), a memory pair's peak (each round's call peaks,
    on a GPU); None for a pair on time (or a round without the metric's readings on a side). Both sides' readings of
    the same rounds, so that load which comes and goes hits both (one child a side read identical code's TTFT 0.54x
    [0.28, 0.65] on a busy 2-core host), and a pair's rounds stop on what its verdict is on."""
    from bench.measure.generation import pair_speedup
    from bench.measure.memory import memory_ratio

    on = metric_of(opt[0]) if opt else "time"
    if on == "time":
        return None
    ratios = []
    for b, o in zip(base, opt, strict=False):
        if b.status != "ok" or o.status != "ok":
            return None
        by_memory = memory_ratio(b, o)
        ratio, metric = (by_memory[0], on) if by_memory is not None else pair_speedup(b, o, None)
        if ratio is None or metric == "time" or ratio <= 0:
            return None
        ratios.append(ratio)
    return ratios


def metric_of(result: VariantResult) -> str:
    """The metric an optimized variant's pair is judged on, where rounds can read it again: its memory metric, its
    generation's, else "time"."""
    from bench.measure.memory import MEMORY_METRICS

    if result.memory is not None and result.memory.metric in MEMORY_METRICS:
        return result.memory.metric
    if result.generation is not None and result.generation.speedup_metric != "time":
        return str(result.generation.speedup_metric)
    return "time"


def fresh_note(setting: str, why: str = "") -> str:
    """A variant's note where its later rounds each ran in a fresh child: ``round_children``'s setting and, under
    "auto" or "kept", why round 0's children were not kept (``Rounds._keeps``)."""
    return f"rounds after the first each in a fresh child (round_children {setting})" + (f": {why}" if why else "")


def repaid_s(first: VariantResult) -> float:
    """What a fresh child of ``first``'s variant pays again before its steady state and a kept one does not, in
    seconds: round 0's start-up and set-up, and its first call beyond a steady one (a compile, an autotune, pinned
    memory allocated: a 10 s first call of a 0.5 s one on the H200, in a fresh child every round); for a
    token-generating variant its warm-up generations after the first call too, ``warmup`` - 1 of round 0's median
    generation (a kept child's later round warms up with its first call alone: bench.isolate.timed._resumed; on the
    H200, chapter 16's serving pairs spent half as long warming up as measuring). A fresh interpreter's start-up
    (``--cold-start``: Python and torch imported, ~2.6 s) is the launch's price, not the variant's: left out, or
    every cold pair would keep its two processes, and their offset (1.3 against 2.5 ms for one softmax on the 2-core
    host) would read as a verdict (an A/A pair 0.63x [0.47, 0.85])."""
    cold = (first.launch or "").startswith("cold_start")
    names = ("setup",) if cold else ("startup", "setup")
    stages = sum(s.duration_s or 0.0 for s in first.stages if s.name in names)
    t = first.timing
    excess = (t.first_call_ms - t.stats.median_ms) / 1e3 if t is not None and t.first_call_ms else 0.0
    warm = _warmup_generations(first) * t.stats.median_ms / 1e3 if t is not None else 0.0
    return stages + max(excess, 0.0) + warm


def repaid_parts(first: VariantResult) -> str:
    """What ``repaid_s`` counts for ``first``, in words (a note's)."""
    paid = ["set-up"] if (first.launch or "").startswith("cold_start") else ["start-up", "set-up"]
    paid.append("first-call excess")
    if _warmup_generations(first):
        paid.append("warm-up generations")
    return f"{', '.join(paid[:-1])} and {paid[-1]}"


def _warmup_generations(first: VariantResult) -> int:
    """The generations a fresh child of a token-generating variant warms up with after its first call and a kept one
    does not (``warmup`` - 1); 0 for a variant that generates no tokens."""
    if first.generation is None:
        return 0
    return max(int(first.config.get("warmup", BenchmarkConfig.model_fields["warmup"].default)) - 1, 0)
