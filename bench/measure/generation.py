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
  the generated tokens only, not the prompts the engine reads). With ``BenchmarkConfig(verify="greedy_tokens")``
  it is ``[tokens, runner_up, gap, offsets]``: beside each token (int64) the runner-up of the step that chose it
  (int64) and their gap, (top1 - top2) / the standard deviation of that step's logits (float32), all three
  written by the steps (the gaps are NaN-poisoned); request r's tokens at ``offsets[r]:offsets[r + 1]`` (int64,
  the cumulated ``new_tokens`` of the request set, checked once and never poisoned). Two engines that round
  differently may then part at a near-tie and still verify (bench.measure.verify).
* optionally ``speedup_metric()`` — what the pair's speedup is computed on: ``"ttft"`` (time to first
  token), ``"tpot"`` (time per output token), ``"itl"`` (inter-token latency), each the median or, with a
  suffix ``_p90`` / ``_p95`` / ``_p99``, that percentile (``"itl_p99"``: the stalls a user sees); ``"throughput"``
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
c gaps of a c-th each). Per run, pooled over the samples' requests (ITL: tokens): the statistics of a call
time (mean, p50, p90, p95, p99; ``median`` is p50); per
sample, tokens / span and requests / span, whose medians are ``tokens_per_s`` and ``requests_per_s``.
The sample itself (``time_*``) is the span: from 0 to the end of the last step. L2 is not flushed between
steps: a serving engine runs them back to back. The harness checks the engine: no token before a
request's arrival, none beyond its ``new_tokens``, all of them by the end.

The pair's 95 % interval (``pair_interval``): a throughput's from each generation's tokens/s (bootstrap of
the ratio of medians); a latency's (TTFT, TPOT, ITL; median or percentile) by resampling whole generations,
the same statistic recomputed on each resample: the requests and tokens of one generation share its steps
and are not independent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.errors import ProtocolError

GENERATION_METHODS = ("get_requests", "start_generation", "generate_step")
# Latency metrics ("ttft", "tpot", "itl"; "_p90"/"_p99" for a percentile instead of the median), then rates.
LATENCIES = ("ttft", "tpot", "itl")
SPEEDUP_METRICS = (*LATENCIES, *(f"{m}_{q}" for m in LATENCIES for q in ("p90", "p95", "p99")), "throughput", "time")
# Decimals (ms) of the per-generation ITLs kept in the result: 0.1 us, finer than a CUDA event's ~0.5 us, and a
# short number in result.json, which holds one per token of every generation.
ITL_DECIMALS = 4
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


def check_greedy_output(outputs: Sequence[Any], requests: Sequence[RequestSpec]) -> None:
    """A ``verify="greedy_tokens"`` output (after set-up): [tokens, runner_up, gap, offsets] of the right dtypes,
    one entry per generated token, and offsets laying out ``requests`` in order. Nothing to check without one."""
    if not outputs:
        return
    layout = "[tokens (int64), runner_up (int64), gap (float32), offsets (int64)]"
    dtypes = [str(t.dtype).replace("torch.", "") for t in outputs]
    if dtypes != ["int64", "int64", "float32", "int64"]:
        raise ProtocolError(
            f"get_output() returned {len(outputs)} tensor(s) of dtypes {', '.join(dtypes)}; verify='greedy_tokens' "
            f"needs {layout}"
        )
    want = [0]
    for r in requests:
        want.append(want[-1] + r.new_tokens)
    sizes = [t.numel() for t in outputs[:3]]
    offsets = outputs[3].reshape(-1).tolist()
    if offsets != want or sizes != [want[-1]] * 3:
        raise ProtocolError(
            f"get_output(): offsets {offsets[:6]}... and {sizes} tokens, runner-ups, gaps; the request set needs "
            f"offsets {want[:6]}... (each request's new_tokens, in order) and {want[-1]} of each"
        )


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
    tally = _Tally(requests)
    now = idle = 0.0
    steps: list[float] = []
    pending = sorted(range(n), key=lambda i: requests[i].arrival_ms)  # not yet arrived, by arrival
    arrived = 0  # pending[:arrived] have arrived
    while True:
        while arrived < n and requests[pending[arrived]].arrival_ms <= now:
            arrived += 1
        if arrived < n and tally.done == arrived:  # tokens come only after arrival: done counts arrived requests
            gap = requests[pending[arrived]].arrival_ms - now  # nothing admitted is left to do: wait
            idle += gap
            now += gap
            continue
        if len(steps) >= MAX_STEPS:
            raise ProtocolError(f"generate_step() ran {MAX_STEPS} steps without finishing ({tally.done} of {n} done)")
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
                    f"{n - tally.done} unfinished"
                )
            gap = requests[pending[arrived]].arrival_ms - now
            idle += max(gap, 0.0)
            now += max(gap, 0.0)
            continue
        tally.emit(counts, now, step_now, len(steps))
    return tally.record(now, steps, idle)


class _Tally:
    """What a generation's requests have emitted so far, and when (the engine is checked as it goes)."""

    def __init__(self, requests: Sequence[RequestSpec]) -> None:
        n = len(requests)
        self.requests = requests
        self.emitted = [0] * n
        self.first: list[float | None] = [None] * n
        self.last: list[float] = [0.0] * n
        self.itl: list[float] = []
        self.done = 0

    def emit(self, counts: dict[int, int], now: float, step_now: float, step: int) -> None:
        """Tokens emitted by the step that started at ``step_now`` and ended at ``now``."""
        for rid, c in counts.items():
            spec = self.requests[rid]
            if spec.arrival_ms > step_now:
                raise ProtocolError(
                    f"generate_step() step {step} (at {step_now:.3f} ms): request {rid} emitted a token "
                    f"before its arrival at {spec.arrival_ms:g} ms"
                )
            if self.emitted[rid] + c > spec.new_tokens:
                raise ProtocolError(
                    f"generate_step() step {step}: request {rid} emitted {self.emitted[rid] + c} tokens, "
                    f"declared new_tokens={spec.new_tokens}"
                )
            if self.first[rid] is None:
                self.first[rid] = now
                self.itl += [0.0] * (c - 1)  # several tokens in its first step: no wait between them
            else:
                self.itl += [(now - self.last[rid]) / c] * c
            self.last[rid] = now
            self.emitted[rid] += c
            self.done += self.emitted[rid] == spec.new_tokens

    def record(self, now: float, steps: list[float], idle: float) -> SampleRecord:
        """The finished generation; every request must have emitted all its tokens."""
        requests, n = self.requests, len(self.requests)
        short = [i for i in range(n) if self.emitted[i] != requests[i].new_tokens]
        if short:
            i = short[0]
            raise ProtocolError(
                f"generate_step() returned None with {len(short)} request(s) unfinished: request {i} emitted "
                f"{self.emitted[i]} of {requests[i].new_tokens} tokens"
            )
        first = self.first
        ttft = [(first[i] or 0.0) - requests[i].arrival_ms for i in range(n)]
        tpot = [
            (self.last[i] - (first[i] or 0.0)) / (requests[i].new_tokens - 1) if requests[i].new_tokens > 1 else None
            for i in range(n)
        ]
        return SampleRecord(now, steps, ttft, tpot, self.itl, sum(self.emitted), idle)


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """Median (p50), p90, p95, p99 (linear interpolation, as bench.measure.stats), mean, min, max."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    p50, p90, p95, p99 = np.percentile(x, [50.0, 90.0, 95.0, 99.0])
    return {
        "median": float(p50),
        "p50": float(p50),
        "p90": float(p90),
        "p95": float(p95),
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
        "ttft_ms": quantiles(ttft),
        "tpot_ms": quantiles(tpot) if tpot else None,
        "itl_ms": quantiles(itl) if itl else None,
        "step_ms": quantiles([s for r in records for s in r.steps_ms]),
        "tokens_per_s": float(np.median([r.tokens / (r.span_ms / 1e3) for r in records])),
        "requests_per_s": float(np.median([len(requests) / (r.span_ms / 1e3) for r in records])),
        "idle_ms": float(np.median([r.idle_ms for r in records])),
        "ttft_samples_ms": [r.ttft_ms for r in records],
        "tpot_samples_ms": [r.tpot_ms for r in records],
        "itl_samples_ms": [[round(v, ITL_DECIMALS) for v in r.itl_ms] for r in records],
        "tokens_per_s_samples": [r.tokens / (r.span_ms / 1e3) for r in records],
    }


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
    """The 95 % interval of the pair's speedup on ``metric``, with the run-to-run term ``run_noise``; None
    with fewer than 2 samples on a side.

    A throughput (the ratio of median tokens/s): bench.measure.stats.speedup_interval over each generation's
    rate. A latency (TTFT, TPOT or ITL; its median or ``_p90``/``_p99``):
    bench.measure.stats.cluster_speedup_interval, which resamples whole generations (its samples: at least 2
    of them), whose requests and tokens share the same steps, and pools them as ``summarize`` does: a
    generation slowed as a whole moves all its requests at once, which a bootstrap of single requests would
    count as independent luck."""
    from bench.measure.stats import cluster_speedup_interval, speedup_interval

    if metric == "throughput":  # rates: the optimized side's over the baseline's
        rates = [side.generation.tokens_per_s_samples for side in (optimized, baseline)]
        if min(len(r) for r in rates) < 2:
            return None
        return speedup_interval(rates[0], rates[1], run_noise)
    name, _, q = metric.partition("_")
    if name not in LATENCIES:
        return None
    sides = [
        [[v for v in row if v is not None] for row in getattr(side.generation, f"{name}_samples_ms")]
        for side in (baseline, optimized)
    ]
    return cluster_speedup_interval(sides[0], sides[1], float(q[1:]) if q else 50.0, run_noise)
