"""Token-generating benchmarks: each engine step timed, TTFT / TPOT / throughput derived per request set.

The protocol
------------
A benchmark declares that it generates tokens by defining, besides ``setup``/``benchmark_fn``/``teardown``:

* ``get_requests()`` — the request set: a sequence, one entry per request (a mapping or an object) with
  ``new_tokens`` (int >= 1: tokens it will emit), ``arrival_ms`` (float >= 0, default 0: when it arrives,
  on the GPU-time axis of the run) and optionally ``prompt_tokens`` (int, reported). Request ``i`` is the
  i-th entry; the set is the same for every generation.
* ``start_generation()`` — reset the engine to "no request seen yet" (KV cache bookkeeping, queues,
  output buffers); called before every generation, outside the timed steps.
* ``generate_step(now_ms)`` — one engine step: admit the requests whose ``arrival_ms <= now_ms`` (the
  elapsed time of this generation, see below), run prefill and/or decode for what is admitted, and return
  how many tokens each request emitted in this step: a mapping ``{request index: count}`` (0 for a request
  it worked on without a token, e.g. a prefill chunk) or a sequence of ``len(requests)`` counts; ``None``
  once every request is done. An empty mapping (or all-zero counts) means "nothing to do until more
  requests arrive" (a static batcher waiting to fill its batch): the clock then jumps to the next arrival.
* ``get_output()`` — the generated token ids (int64, greedy), written by the steps: the harness fills it
  with -1 after ``start_generation()`` and requires the steps to overwrite every entry (so it must hold
  the generated tokens only, not the prompts the engine reads).
* optionally ``speedup_metric()`` — what the pair's speedup is computed on: ``"ttft"`` (time to first
  token), ``"tpot"`` (time per output token), ``"itl"`` (inter-token latency), each the median or, with a
  suffix ``_p90`` / ``_p99``, that percentile (``"itl_p99"``: the stalls a user sees); ``"throughput"``
  (tokens per second) or ``"time"`` (the whole generation's median, the default).

The clock
---------
One sample is one whole generation of the request set. ``GenerationClock`` calls ``start_generation()``,
then ``generate_step`` until it returns None, timing each step: CUDA events around the step and a device
synchronize after it on a GPU (``timing_mode`` "auto"/"cuda_event"), ``perf_counter`` with the device
synchronized on either side otherwise. Each step starts on an idle device, so its time includes the
engine's host work (scheduling, launches) as a serving engine that reads its sampled tokens every step
pays it; the harness's own bookkeeping between steps is not counted. The run's clock ``now_ms`` is the sum
of the step times so far; when every request that has arrived is done and more are to come, the clock
jumps to the next arrival (the engine idles, and the idle time counts in the generation's span).

Per request: its first token's time is the end of the step that emitted it, TTFT = that - arrival, TPOT =
(last token's time - first token's time) / (tokens - 1) (requests with one token have none); ITL, per
token after its first, the gap since the request's previous emission (a step that emits c tokens for it:
c gaps of a c-th each). Per run, pooled over the samples' requests (ITL: tokens): median, p90, p99; per
sample, tokens / span and requests / span, whose medians are ``tokens_per_s`` and ``requests_per_s``.
The sample itself (``time_*``) is the span: from 0 to the end of the last step. L2 is not flushed between
steps: a serving engine runs them back to back. The harness checks the engine: no token before a
request's arrival, none beyond its ``new_tokens``, all of them by the end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.errors import ProtocolError
from bench.measure.stopping import Measurement, StopRule, sample_until

GENERATION_METHODS = ("get_requests", "start_generation", "generate_step")
# Latency metrics ("ttft", "tpot", "itl"; "_p90"/"_p99" for a percentile instead of the median), then rates.
LATENCIES = ("ttft", "tpot", "itl")
SPEEDUP_METRICS = (*LATENCIES, *(f"{m}_{q}" for m in LATENCIES for q in ("p90", "p99")), "throughput", "time")
# A step loop that never finishes is a broken engine: stop it with a clear error, long before any stage limit.
MAX_STEPS = 1_000_000


def is_generating(obj: object) -> bool:
    """True when ``obj`` declares the generation protocol (all of GENERATION_METHODS); a benchmark that
    defines only some of them is a mistake, reported by name."""
    have = [m for m in GENERATION_METHODS if callable(getattr(obj, m, None))]
    if have and len(have) < len(GENERATION_METHODS):
        missing = [m for m in GENERATION_METHODS if m not in have]
        raise ProtocolError(
            f"{type(obj).__name__} defines {', '.join(have)} but not {', '.join(missing)}: a token-generating "
            f"benchmark needs all of {', '.join(GENERATION_METHODS)}"
        )
    return bool(have)


@dataclass(frozen=True)
class RequestSpec:
    new_tokens: int
    arrival_ms: float = 0.0
    prompt_tokens: int | None = None


def _field(entry: Any, name: str, default: Any) -> Any:
    if isinstance(entry, Mapping):
        return entry.get(name, default)
    return getattr(entry, name, default)


def read_requests(obj: Any) -> list[RequestSpec]:
    """The benchmark's request set, checked: at least one request, new_tokens >= 1, arrival_ms >= 0 and finite."""
    entries = list(obj.get_requests())
    if not entries:
        raise ProtocolError("get_requests() returned no request; a generation needs at least one")
    out = []
    for i, e in enumerate(entries):
        new, arrival = _field(e, "new_tokens", None), _field(e, "arrival_ms", 0.0)
        prompt = _field(e, "prompt_tokens", None)
        if not isinstance(new, int) or new < 1:
            raise ProtocolError(f"request {i}: new_tokens={new!r} must be an int >= 1")
        if not isinstance(arrival, (int, float)) or not math.isfinite(arrival) or arrival < 0:
            raise ProtocolError(f"request {i}: arrival_ms={arrival!r} must be a finite number >= 0")
        out.append(RequestSpec(new_tokens=new, arrival_ms=float(arrival), prompt_tokens=prompt))
    return out


def speedup_metric(obj: Any) -> str:
    """The metric the benchmark's pair is compared on (``speedup_metric()``, default "time")."""
    get = getattr(obj, "speedup_metric", None)
    metric = get() if callable(get) else "time"
    if metric not in SPEEDUP_METRICS:
        raise ProtocolError(f"speedup_metric() returned {metric!r}; accepted: {', '.join(SPEEDUP_METRICS)}")
    return str(metric)


def arrival_pattern(requests: Sequence[RequestSpec]) -> str:
    """The arrival pattern in words, for the result."""
    arrivals = sorted(r.arrival_ms for r in requests)
    if arrivals[-1] == arrivals[0]:
        return f"{len(requests)} requests, all at {arrivals[0]:g} ms"
    return f"{len(requests)} requests arriving over {arrivals[0]:g}-{arrivals[-1]:g} ms"


@dataclass
class SampleRecord:
    """One generation of the request set, on its own time axis (ms from its start)."""

    span_ms: float
    steps_ms: list[float]
    ttft_ms: list[float]  # per request
    tpot_ms: list[float | None]  # per request; None: it emitted one token
    itl_ms: list[float]  # per token after a request's first: the gap since its previous emission (shared)
    tokens: int
    idle_ms: float = 0.0  # waiting for arrivals with nothing to do


# A step timer: runs the call, returns its result and its duration in ms.
StepTimer = Callable[[Callable[[], Any]], tuple[Any, float]]


def _counts(result: Any, n: int, step: int) -> tuple[dict[int, int], bool]:
    """The tokens each request emitted (zeros dropped), and whether the step did anything at all."""
    if isinstance(result, Mapping):
        items = list(result.items())
    elif hasattr(result, "tolist"):  # a tensor or an array of counts
        items = list(enumerate(result.tolist()))
    elif isinstance(result, Sequence) and not isinstance(result, str):
        if len(result) != n:
            raise ProtocolError(f"generate_step() step {step}: returned {len(result)} counts for {n} requests")
        items = list(enumerate(result))
    else:
        raise ProtocolError(
            f"generate_step() step {step}: returned {type(result).__name__}; expected a mapping "
            "{request index: tokens emitted}, a sequence of counts, or None when every request is done"
        )
    out: dict[int, int] = {}
    for rid, c in items:
        if not isinstance(rid, int) or not 0 <= rid < n:
            raise ProtocolError(f"generate_step() step {step}: request index {rid!r} is not in 0..{n - 1}")
        if not isinstance(c, int) or c < 0:
            raise ProtocolError(f"generate_step() step {step}: request {rid} emitted {c!r} tokens; need an int >= 0")
        if c:
            out[rid] = out.get(rid, 0) + c
    return out, bool(out) or (isinstance(result, Mapping) and bool(result))


def run_generation(obj: Any, requests: Sequence[RequestSpec], timer: StepTimer) -> SampleRecord:
    """One generation: ``start_generation()``, then timed ``generate_step(now_ms)`` until it returns None."""
    n = len(requests)
    emitted = [0] * n
    first: list[float | None] = [None] * n
    last: list[float] = [0.0] * n
    itl: list[float] = []
    done = 0
    now = idle = 0.0
    steps: list[float] = []
    pending = sorted(range(n), key=lambda i: requests[i].arrival_ms)  # not yet arrived, by arrival
    arrived = 0  # pending[:arrived] have arrived
    while True:
        while arrived < n and requests[pending[arrived]].arrival_ms <= now:
            arrived += 1
        if arrived < n and done == arrived:  # tokens come only after arrival, so done counts arrived requests
            gap = requests[pending[arrived]].arrival_ms - now  # nothing admitted is left to do: wait
            idle += gap
            now += gap
            continue
        if len(steps) >= MAX_STEPS:
            raise ProtocolError(f"generate_step() ran {MAX_STEPS} steps without finishing ({done} of {n} done)")
        step_now = now
        result, ms = timer(lambda t=step_now: obj.generate_step(t))
        if result is None:
            break
        steps.append(ms)
        now += ms
        counts, worked = _counts(result, n, len(steps))
        if not worked:  # the engine waits for arrivals
            if arrived == n:
                raise ProtocolError(
                    f"generate_step() step {len(steps)} did nothing with every request arrived and "
                    f"{n - done} unfinished"
                )
            gap = requests[pending[arrived]].arrival_ms - now
            idle += max(gap, 0.0)
            now += max(gap, 0.0)
            continue
        for rid, c in counts.items():
            spec = requests[rid]
            if spec.arrival_ms > step_now:
                raise ProtocolError(
                    f"generate_step() step {len(steps)} (at {step_now:.3f} ms): request {rid} emitted a token "
                    f"before its arrival at {spec.arrival_ms:g} ms"
                )
            if emitted[rid] + c > spec.new_tokens:
                raise ProtocolError(
                    f"generate_step() step {len(steps)}: request {rid} emitted {emitted[rid] + c} tokens, "
                    f"declared new_tokens={spec.new_tokens}"
                )
            if first[rid] is None:
                first[rid] = now
                itl += [0.0] * (c - 1)  # several tokens in its first step: no wait between them
            else:
                itl += [(now - last[rid]) / c] * c
            last[rid] = now
            emitted[rid] += c
            done += emitted[rid] == spec.new_tokens
    short = [i for i in range(n) if emitted[i] != requests[i].new_tokens]
    if short:
        i = short[0]
        raise ProtocolError(
            f"generate_step() returned None with {len(short)} request(s) unfinished: request {i} emitted "
            f"{emitted[i]} of {requests[i].new_tokens} tokens"
        )
    ttft = [(first[i] or 0.0) - requests[i].arrival_ms for i in range(n)]
    tpot = [
        (last[i] - (first[i] or 0.0)) / (requests[i].new_tokens - 1) if requests[i].new_tokens > 1 else None
        for i in range(n)
    ]
    return SampleRecord(now, steps, ttft, tpot, itl, sum(emitted), idle)


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    """Median, p90, p99 (linear interpolation, as bench.measure.stats), mean, min, max."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    p50, p90, p99 = np.percentile(x, [50.0, 90.0, 99.0])
    return {
        "median": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "mean": float(x.mean()),
        "min": float(x.min()),
        "max": float(x.max()),
    }


def summarize(records: Sequence[SampleRecord], requests: Sequence[RequestSpec], metric: str) -> dict[str, Any]:
    """The ``Generation`` result's fields (bench.define.result) from the measured samples."""
    import numpy as np

    if not records:
        raise ValueError("summarize() needs at least one generation sample")
    ttft = [v for r in records for v in r.ttft_ms]
    tpot = [v for r in records for v in r.tpot_ms if v is not None]
    itl = [v for r in records for v in r.itl_ms]
    prompts = [r.prompt_tokens for r in requests]
    return {
        "requests": len(requests),
        "tokens": records[0].tokens,
        "prompt_tokens": sum(prompts) if all(p is not None for p in prompts) else None,  # type: ignore[misc]
        "arrival": arrival_pattern(requests),
        "arrivals_ms": [r.arrival_ms for r in requests],
        "speedup_metric": metric,
        "samples": len(records),
        "steps": int(np.median([len(r.steps_ms) for r in records])),
        "ttft_ms": _quantiles(ttft),
        "tpot_ms": _quantiles(tpot) if tpot else None,
        "itl_ms": _quantiles(itl) if itl else None,
        "step_ms": _quantiles([s for r in records for s in r.steps_ms]),
        "tokens_per_s": float(np.median([r.tokens / (r.span_ms / 1e3) for r in records])),
        "requests_per_s": float(np.median([len(requests) / (r.span_ms / 1e3) for r in records])),
        "idle_ms": float(np.median([r.idle_ms for r in records])),
        "ttft_samples_ms": [r.ttft_ms for r in records],
        "tpot_samples_ms": [r.tpot_ms for r in records],
    }


@dataclass
class GenerationClock:
    """The harness's clock for a token-generating benchmark (the surface of bench.measure.clocks's clocks:
    ``first_call``, ``warmup``, ``measure``); one sample = one generation of the request set, its span."""

    obj: Any
    device: Any
    events: bool  # CUDA events per step (else perf_counter with device syncs)
    min_warmup_s: float = 0.3
    fallback: str | None = None
    notes: list[str] = field(default_factory=list)
    l2_flushed: bool = False
    warmup_done: int = 0
    stable: bool | None = None  # a generation's span is not judged for a steady state (bench.measure.clocks's is)
    invalid: str | None = None  # the device-wide sync after each step leaves no side-stream work untimed
    records: list[SampleRecord] = field(default_factory=list)
    unwritten: int = 0  # measured generations that left the output's poison in place

    def __post_init__(self) -> None:
        self.requests = read_requests(self.obj)
        self.metric = speedup_metric(self.obj)
        self.mode = "cuda_event" if self.events else "cpu"
        self._timer = self._event_timer() if self.events else self._cpu_timer()

    @property
    def method(self) -> str:
        how = (
            "CUDA events around each engine step, device synchronized after it"
            if self.events
            else "time.perf_counter around each engine step, device synchronized before and after"
        )
        return (
            f"token generation (bench.measure.generation): {how}; one sample = one generation of "
            f"{arrival_pattern(self.requests)}, its span on the steps' time axis; L2 not flushed between steps"
        )

    def _sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def _cpu_timer(self) -> StepTimer:
        def timer(call: Callable[[], Any]) -> tuple[Any, float]:
            self._sync()
            t0 = time.perf_counter()
            out = call()
            self._sync()
            return out, (time.perf_counter() - t0) * 1e3

        return timer

    def _event_timer(self) -> StepTimer:
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def timer(call: Callable[[], Any]) -> tuple[Any, float]:
            start.record()
            out = call()
            end.record()
            torch.cuda.synchronize(self.device)  # device-wide: the step's work on any stream is over
            return out, float(start.elapsed_time(end))

        return timer

    def _outputs(self) -> list[Any]:
        get = getattr(self.obj, "get_output", None)
        out = get() if callable(get) else None
        if out is None:
            return []
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def _poison(self) -> None:
        """INTEGRITY #6 for tokens: every output entry must be written by this generation's steps."""
        for t in self._outputs():
            if t.is_floating_point() or t.is_complex():
                t.fill_(float("nan"))
            elif t.dtype.is_signed:
                t.fill_(-1)

    def _poisoned(self) -> bool:
        import torch

        for t in self._outputs():
            if t.is_floating_point() or t.is_complex():
                if bool(torch.isnan(t).any()):
                    return True
            elif t.dtype.is_signed and bool((t == -1).any()):
                return True
        return False

    def _generate(self) -> SampleRecord:
        self.obj.start_generation()
        self._poison()
        self._sync()
        return run_generation(self.obj, self.requests, self._timer)

    def first_call(self, fn: Callable[[], Any]) -> float:
        """The first generation's wall time (compilation, graph capture and allocator warm-up included)."""
        self._sync()
        t0 = time.perf_counter()
        self._generate()
        self._sync()
        return (time.perf_counter() - t0) * 1e3

    def warmup(self, fn: Callable[[], Any], n: int) -> None:
        """``n`` generations, and more until ``min_warmup_s`` has passed (a fresh process's host is slow
        at first, and every step's host work is in the sample)."""
        t_end = time.perf_counter() + self.min_warmup_s
        done = 0
        while done < n or time.perf_counter() < t_end:
            self._generate()
            done += 1
        self.warmup_done = done

    def eager(self, fn: Callable[[], Any]) -> float:
        """One generation's span (ms): the recheck's call from the set-up state."""
        return self._generate().span_ms

    def measure_batch(self, fn: Callable[[], Any], median_ms: float) -> None:
        """No batch time: a generation's steps already run back to back."""
        return None

    def measure(self, fn: Callable[[], Any], iterations: int | None, rule: StopRule) -> Measurement:
        def one() -> float:
            record = self._generate()
            self.unwritten += self._poisoned()
            self.records.append(record)
            return record.span_ms

        return sample_until(one, iterations, rule)

    def result(self) -> dict[str, Any]:
        """The measured generations, summarised (the ``generation`` message: bench.define.result.Generation)."""
        return summarize(self.records, self.requests, self.metric)

    def wrote_output(self) -> bool | None:
        """False when a measured generation left part of the output unwritten; None without an output."""
        if not self._outputs():
            return None
        return self.unwritten == 0


def generation_clock(obj: Any, config: Any, device: Any) -> GenerationClock | None:
    """The clock for ``obj`` when it generates tokens (else None: the harness's usual clock).

    ``timing_mode`` "auto" or "cuda_event" on a GPU: CUDA events per step; "cpu": perf_counter per step;
    any other mode times single calls and does not apply, so events are used and the fallback says why.
    """
    if not is_generating(obj):
        return None
    mode = getattr(config, "timing_mode", "auto")
    cuda = device.type == "cuda"
    floor = getattr(config, "min_warmup_seconds", None)
    clock = GenerationClock(obj, device, events=cuda and mode != "cpu", min_warmup_s=0.3 if floor is None else floor)
    if mode not in ("auto", "cpu", "cuda_event"):
        clock.fallback = f"timing_mode {mode!r} times single calls; a generation is timed step by step ({clock.mode})"
    return clock


def pair_speedup(baseline: Any, optimized: Any, time_speedup: float | None) -> tuple[float | None, str]:
    """The pair's speedup on the metric the optimized variant names, and that metric.

    ``baseline``/``optimized`` are VariantResults; ``time_speedup`` is the harness's time-median ratio.
    A metric the results cannot give (no generation on one side, no TPOT) leaves the time speedup, named
    "time".
    """
    b, o = getattr(baseline, "generation", None), getattr(optimized, "generation", None)
    metric = o.speedup_metric if o is not None else "time"
    if metric == "time" or b is None or o is None:
        return time_speedup, "time"
    if metric == "throughput":
        return (o.tokens_per_s / b.tokens_per_s if b.tokens_per_s > 0 else None), metric
    name, _, q = metric.partition("_")
    stats_b, stats_o = getattr(b, f"{name}_ms"), getattr(o, f"{name}_ms")
    q = q or "median"
    if not stats_b or not stats_o or q not in stats_b or q not in stats_o or stats_o[q] <= 0:
        return time_speedup, "time"
    return stats_b[q] / stats_o[q], metric


def pair_interval(baseline: Any, optimized: Any, metric: str, run_noise: float) -> tuple[float, float] | None:
    """The 95 % interval of a TTFT or TPOT median speedup, from the per-request samples pooled over
    generations (bench.measure.stats.speedup_interval with the run-to-run term ``run_noise``). Other metrics get
    none: a percentile's or a rate's interval is not what the bootstrap of medians gives."""
    if metric not in ("ttft", "tpot"):
        return None
    pooled = []
    for side in (baseline, optimized):
        rows = getattr(side.generation, f"{metric}_samples_ms")
        pooled.append([v for row in rows for v in row if v is not None])
    if min(len(p) for p in pooled) < 2:
        return None
    from bench.measure.stats import speedup_interval

    return speedup_interval(pooled[0], pooled[1], run_noise)
