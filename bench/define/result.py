"""The data a run produces: a variant's result (raw samples kept) and a baseline/optimized comparison.

A child process builds a ``VariantResult`` and hands it to the parent as JSON; verification and speedups are
computed in the parent (``bench.measure.compare``) from two results, never by the child."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bench.define.timing import BatchTiming, EnergyUse, Memory, Timing

Status = Literal["ok", "failed", "timeout", "skipped", "invalid"]
StageStatus = Literal["ok", "failed", "timeout", "not_reached"]
PairStatus = Literal["ok", "mismatch", "unverified", "failed", "skipped"]

# Order of the stages. A timed child ("run") has all but profiling (batch: back-to-back calls, when measured; recheck:
# the set-up state restored and the inputs changed, bench.measure.guard); a profile child ("profile"): startup,
# setup, warmup, profiling, teardown; a "verify" child: startup, setup, teardown.
STAGES = ("startup", "setup", "warmup", "measurement", "check", "batch", "energy", "recheck", "profiling", "teardown")


class VariantSpec(BaseModel):
    """One runnable file: ``chapters/ch07/optimized_transpose_tiled.py`` → (ch07, transpose, optimized_tiled)."""

    model_config = ConfigDict(frozen=True)

    chapter: str  # "ch07"
    example: str  # "transpose"
    variant: str  # "baseline", "optimized" or "optimized_<name>"
    path: str  # absolute path of the benchmark file
    # A KernelBench candidate (``ModelNew``): the reference file whose get_inputs()/get_init_inputs() it runs on
    reference: str | None = None
    # SHA-256 of the file when found (not its imports): two suites' same file told from a changed one (compare)
    source_sha256: str | None = None

    @model_validator(mode="after")
    def _hash_source(self) -> VariantSpec:
        if self.source_sha256 is None and Path(self.path).is_file():
            object.__setattr__(self, "source_sha256", hashlib.sha256(Path(self.path).read_bytes()).hexdigest())
        return self

    @property
    def target(self) -> str:
        return f"{self.chapter}:{self.example}"

    @property
    def key(self) -> str:
        return f"{self.chapter}:{self.example}:{self.variant}"

    @property
    def is_baseline(self) -> bool:
        return self.variant == "baseline"


class StageRecord(BaseModel):
    name: str
    status: StageStatus
    duration_s: float | None = None  # wall time the parent saw between the stage's start and end
    limit_s: float | None = None  # the limit the parent enforced


class ErrorInfo(BaseModel):
    kind: Literal["exception", "crash", "timeout", "invalid", "protocol"]
    message: str
    traceback: str | None = None
    exit_code: int | None = None  # negative: killed by that signal number


class Recheck(BaseModel):
    """What the recheck stage found (bench.measure.guard): the timed calls against the set-up state, changed inputs."""

    mutated: list[str] = Field(default_factory=list)  # set-up tensors the timed calls changed
    restored_ms: float | None = None  # one call from the set-up state again (when mutated)
    # controlled: one call on a fresh set-up holding what the timed calls left (the fastest of a few);
    # else the same kind of call at the end of warm-up (eager cold calls on a GPU)
    reference_ms: float | None = None
    controlled: bool = False
    restored_times_ms: list[float] = Field(default_factory=list)  # every round's call from the set-up state
    reference_times_ms: list[float] = Field(default_factory=list)  # every round's call holding what was left
    restore_cut: bool = False  # the rounds stopped within the stage's limit, before the rule's end
    restored_same_output: bool | None = None
    perturbed: int | None = None  # set-up tensors changed in place before one more call
    output_changed: bool | None = None  # the output followed the changed inputs
    fresh: OutputInfo | None = None  # a sample of that output, compared with the baseline's


class Quality(BaseModel):
    metric: str  # speedup_metric(): "quality" (higher is better) or "error" (lower); bench.measure.quality
    readings: list[float] = Field(default_factory=list)  # metrics()' readings after the timed calls, one per item
    verdict: bool = True  # the pair's verdict is on it (speedup_metric()); else only its verification (a lossy pair)


class TensorInfo(BaseModel):
    shape: list[int]
    dtype: str
    device: str


class Produced(BaseModel):
    """Whether the output is the call's (bench.isolate.produced): the looks after the measurement."""

    settled: bool | None = None  # the output unchanged once the call returned (device synced, its threads joined)
    threads_left: int = 0  # threads the call started that were still running when it returned
    get_output_ms: float | None = None  # get_output()'s time beyond a call's (fastest against fastest)
    call_ms: float | None = None  # the fastest call in those rounds
    alone_ms: list[float] = Field(default_factory=list)  # the rounds: a call alone
    with_get_ms: list[float] = Field(default_factory=list)  # and a call followed by get_output()


class OutputInfo(BaseModel):
    path: str | None  # directory of the output tensors' raw files (bench/measure/outputs.py), for the comparison
    tensors: list[TensorInfo]
    timed_calls_wrote_output: bool | None = None  # None: poisoning not applicable
    style: Literal["get_output", "returned"] | None = None  # where the output came from
    returned: str | None = None  # without tensors (no path): the type benchmark_fn() last returned ("float", "None")
    produced: Produced | None = None  # None: not looked at (several ranks, token generation, no output)
    repeated: bool | None = None  # a call more on the same inputs gave it again (bench.measure.repeat); None: unknown
    repeat_max_abs_diff: float | None = None  # the largest |difference| of the two (None: not finite, other shapes)


class Work(BaseModel):
    """Work per benchmark_fn call, declared by the benchmark (optional get_work())."""

    bytes: float | None = None  # minimum bytes moved through device memory (read + written)
    flops: float | None = None  # of all ranks together, for a variant with world_size > 1
    # A collective's payload per rank (nccl-tests' "size": the bytes of the buffer each rank reduces or
    # gathers) and the factor that turns its algorithm bandwidth (payload ÷ time) into bus bandwidth, the
    # figure comparable with a link's peer bandwidth whatever the number of ranks n: 2(n-1)/n for all-reduce,
    # (n-1)/n for all-gather and reduce-scatter, 1 for broadcast and reduce (NCCL's PERFORMANCE.md).
    comm_bytes: float | None = None
    bus_factor: float | None = None
    # The matmul peak the FLOPs compete with (bf16, fp16, fp8, tf32, fp32), where the first output's dtype
    # does not say it: e.g. fp32 losses of a training step whose matmuls run under bf16 autocast.
    dtype: Literal["bf16", "fp16", "fp8", "tf32", "fp32"] | None = None
    # A ceiling the device's roofline does not know, stated by the benchmark: the least time one call can take
    # under a limit it names in words (host-to-device copies at the PCIe rate measured in setup, a copy engine
    # per direction, ...), and the share of it (%) the benchmark means to reach. Where stated, pct_of_peak is
    # of this ceiling (ceiling_ms ÷ median) and the README judges the pair against ceiling_target_pct.
    ceiling: str | None = None
    ceiling_ms: float | None = None
    ceiling_target_pct: float | None = None
    STATED: ClassVar[tuple[str, ...]] = ("ceiling", "ceiling_ms", "ceiling_target_pct")

    @model_validator(mode="after")
    def _stated_ceiling(self) -> Work:
        stated = [getattr(self, name) for name in self.STATED]
        if any(v is not None for v in stated) and any(v is None for v in stated):
            raise ValueError(
                f"ceiling={self.ceiling!r}, ceiling_ms={self.ceiling_ms!r}, ceiling_target_pct="
                f"{self.ceiling_target_pct!r}: a stated ceiling needs all three (its name, ms per call, target %)"
            )
        if self.ceiling_ms is not None and not (math.isfinite(self.ceiling_ms) and self.ceiling_ms > 0):
            raise ValueError(f"ceiling_ms={self.ceiling_ms!r}: the least time of a call, in ms, finite and > 0")
        if self.ceiling_target_pct is not None and not 0 < self.ceiling_target_pct <= 100:
            raise ValueError(f"ceiling_target_pct={self.ceiling_target_pct!r}: a share of the ceiling, in (0, 100]")
        return self


class Profile(BaseModel):
    """What the profile children found (bench.profile.tools); timed numbers never come from them. Artifacts,
    logged under profile/: trace.json.gz, top_ops.csv/.md, ncu.csv, .ncu-rep, .nsys-rep, profile.json."""

    dir: str | None = None
    tools: dict[str, str] = Field(default_factory=dict)  # tool → "ok", "skipped: <why>", "failed: <why>"
    metrics: dict[str, float] = Field(default_factory=dict)  # prof_*, ncu_*
    top_ops: list[dict[str, Any]] = Field(default_factory=list)  # name, count, us_per_call, pct
    bound: str | None = None  # launch | memory | compute | latency | unknown (bench.profile.verdict)
    bound_evidence: str | None = None
    wall_s: float | None = None  # seconds its profile children took, all tools (the suite's "profile" time)
    split_s: dict[str, float] = Field(default_factory=dict)  # wall_s's: bench.isolate.profiled


# --- token generation (bench/measure/generation.py) -----------------------------------------------------------
class Generation(BaseModel):
    """A token-generating benchmark's request set and what its measured generations gave (bench.measure.generation).

    Statistics dicts hold median (p50), p90, p95, p99, mean, min, max (ms), as a call time's; TTFT and TPOT are
    pooled over every measured generation's requests, step times over their steps; rates are medians over
    generations."""

    requests: int
    tokens: int  # tokens emitted per generation (all requests)
    prompt_tokens: int | None = None  # prompt tokens of all requests, when the benchmark states them
    arrival: str  # the arrival pattern in words
    arrivals_ms: list[float] = Field(default_factory=list)  # per request
    # What the pair's speedup uses: ttft, tpot, itl (medians; "_p90"/"_p95"/"_p99": that percentile), throughput,
    # time (bench.measure.generation.SPEEDUP_METRICS)
    speedup_metric: str = "time"
    samples: int  # measured generations
    steps: int  # engine steps per generation (median)
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float] | None = None  # None: every request emitted a single token
    itl_ms: dict[str, float] | None = None  # inter-token latency, per token after a request's first
    step_ms: dict[str, float]
    tokens_per_s: float
    requests_per_s: float
    idle_ms: float = 0.0  # per generation (median): waiting for arrivals with nothing admitted left to do
    ttft_samples_ms: list[list[float]] = Field(default_factory=list)  # raw: per generation, per request
    tpot_samples_ms: list[list[float | None]] = Field(default_factory=list)
    # raw: per generation, per token after a request's first, rounded to 0.1 us (generation.ITL_DECIMALS)
    itl_samples_ms: list[list[float]] = Field(default_factory=list)
    tokens_per_s_samples: list[float] = Field(default_factory=list)  # raw: per generation

    def metrics(self) -> dict[str, float]:
        """The MLflow metrics: ttft_/tpot_/itl_ mean, median, p50, p90, p95, p99 (ms; a call time's statistics),
        tokens_per_s, requests_per_s."""
        out = {"tokens_per_s": self.tokens_per_s, "requests_per_s": self.requests_per_s}
        for name, stats in (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("itl", self.itl_ms)):
            for q in ("mean", "median", "p50", "p90", "p95", "p99"):
                if stats and q in stats:
                    out[f"{name}_{q}_ms"] = stats[q]
        return out


# --- end token generation ------------------------------------------------------------------------------


class VariantResult(BaseModel):
    spec: VariantSpec
    status: Status
    failed_stage: str | None = None
    elapsed_s: float = 0.0
    limit_s: float | None = None  # the limit of the failed stage, when it timed out
    stages: list[StageRecord] = Field(default_factory=list)
    error: ErrorInfo | None = None
    skip_reason: str | None = None  # status "skipped": what the host lacks (context().require / skip)
    config: dict[str, Any] = Field(default_factory=dict)  # effective config (all layers applied)
    # Sizes the benchmark asked for or recorded through its context (working_set, record): what ran.
    sizes: dict[str, int | float | str] = Field(default_factory=dict)
    device: str | None = None  # resolved device, e.g. "cuda:0" or "cpu"
    cuda_visible_devices: str | None = None  # the worker's pinning (--gpus): which physical GPU "cuda:0" was
    launch: str | None = None  # "server" (fast path) or "cold_start" (fresh interpreter), and why
    # Seconds its child ran before the previous variant on the same worker was over (start-up, CUDA
    # context; held before setup() at its gate: bench.isolate.workers); None when it was not started ahead.
    ahead_s: float | None = None
    # Started ahead, when its child reached the gate after the gate had opened: how long the worker then
    # waited for it (start-up, CUDA context taking longer than the previous variant's end).
    gate_late_s: float | None = None
    # Seconds its child took to create its CUDA context (cuInit + primary context); None on the CPU.
    cuda_start_s: float | None = None
    timing: Timing | None = None
    batch: BatchTiming | None = None
    energy: EnergyUse | None = None  # with measure_energy (bench.measure.energy)
    recheck: Recheck | None = None
    tampered: list[str] = Field(default_factory=list)  # clocks the benchmark replaced (bench.measure.guard)
    memory: Memory | None = None
    quality: Quality | None = None  # a quality pair's readings (bench.measure.quality)
    output: OutputInfo | None = None
    work: Work | None = None
    validation: str | None = None  # message from validate_result(); None = passed or not defined
    manifest: dict[str, Any] = Field(default_factory=dict)
    profile: Profile | None = None  # from the separate profile child(ren), when profiling was asked for
    files: str | None = None  # the directory of the files it handed over (context().file), logged under files/
    generation: Generation | None = None  # token-generating benchmarks only (bench.measure.generation)
    # The host manifest (bench.record.manifest) of the machine it ran on when that is not the suite's own: a
    # Ray node (bench.isolate.cluster). None: the host of the command that ran the suite.
    host: dict[str, Any] | None = None

    @property
    def median_ms(self) -> float | None:
        return self.timing.stats.median_ms if self.timing else None

    def derived_metrics(self) -> dict[str, float]:
        """Achieved throughput from declared work and the median time."""
        out: dict[str, float] = {}
        if self.work and self.timing and self.timing.stats.median_ms > 0:
            seconds = self.timing.stats.median_ms / 1e3
            if self.work.bytes:
                out["achieved_gbps"] = self.work.bytes / seconds / 1e9
            if self.work.flops:
                out["achieved_tflops"] = self.work.flops / seconds / 1e12
            if self.work.bytes and self.work.flops:
                out["arithmetic_intensity"] = self.work.flops / self.work.bytes
            if self.work.comm_bytes:
                out["algbw_gbps"] = self.work.comm_bytes / seconds / 1e9
                if self.work.bus_factor:
                    out["busbw_gbps"] = out["algbw_gbps"] * self.work.bus_factor
        return out

    @property
    def world_size(self) -> int:
        """The processes (GPUs, on a GPU) the variant ran on: its config's world_size."""
        return int(self.config.get("world_size", 1) or 1)


Recheck.model_rebuild()


class Verification(BaseModel):
    verified: bool
    # match: checked and equal; mismatch: checked and different; inconclusive: could not be checked
    outcome: Literal["match", "mismatch", "inconclusive"] = "inconclusive"
    detail: str  # why (not) verified, in words
    max_rel_error: float | None = None
    rtol: float | None = None


class Comparison(BaseModel):
    chapter: str
    example: str
    variant: str  # the optimized variant's name
    baseline_status: Status
    optimized_status: Status
    baseline_median_ms: float | None = None  # each side's median call time (cold), whatever the speedup is on
    optimized_median_ms: float | None = None
    # The two values the speedup divides, on its basis (``speedup_metric``, ``speedup_time``;
    # bench.measure.basis): ms, or tokens/s for a throughput; the medians above for a speedup on the cold call.
    baseline_value: float | None = None
    optimized_value: float | None = None
    speedup: float | None = None  # baseline value / optimized value (a rate: optimized / baseline); never clamped
    speedup_time: Literal["cold", "batch"] = "cold"  # which time the speedup is on (BenchmarkConfig.speedup_time)
    # 95 % interval: a bootstrap of the ratio of medians, widened by the run-to-run spread (stats.speedup_interval)
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    # "faster" / "slower": the interval lies above 1 + noise_threshold / below 1 / (1 + noise_threshold); "no
    # significant difference": it holds 1.0 or lies within that band (bench.measure.stats.significance)
    significance: Literal["faster", "slower", "no significant difference"] | None = None
    # The threshold the verdict was judged with: the config's noise_threshold on a time, 0 on a memory peak or a
    # quality reading (bench.measure.compare.noise_threshold); None without an interval
    noise_threshold: float | None = None
    status: PairStatus
    verification: Verification
    # What ``speedup`` is the ratio of: "time" (medians of the whole call) or, for a token-generating pair,
    # the metric it names: "ttft", "tpot" (medians, baseline / optimized), "throughput" (tokens/s, optimized
    # / baseline); bench.measure.generation.pair_speedup; or a memory pair's "peak_memory", "peak_reserved" (peak
    # baseline / optimized, > 1: the optimized side needs less; bench.measure.memory.memory_ratio); or a quality
    # pair's "quality" (mean optimized / baseline) or "error" (mean baseline / optimized): > 1, the optimized side
    # does better (bench.measure.quality.quality_ratio).
    speedup_metric: str = "time"
    # Measured in rounds (bench.isolate.rounds, bench.measure.rounds): each round's ratio of medians, baseline over
    # optimized; the speedup is their geometric mean and its interval a t interval over them (98 % where they stopped
    # early, 96 % after all of them). rounds_stop: why no more rounds ran: "precision" (within ±speedup_precision),
    # "decided", "equivalent" (within ±noise_threshold), "max_rounds", "time_limit", or the side that failed; empty
    # and None for one child per side. rounds_left_out: rounds (from 0) not in them, the host busy (isolate.rounds).
    round_speedups: list[float] = Field(default_factory=list)
    rounds_stop: str | None = None
    rounds_left_out: list[int] = Field(default_factory=list)
    # Both sides' energy per call measured (measure_energy): baseline / optimized, > 1 when the optimized side
    # uses less, with its 95 % interval from both sides' per-segment samples (as the speedup's)
    baseline_energy_mj: float | None = None  # each side's median energy per call
    optimized_energy_mj: float | None = None
    energy_ratio: float | None = None
    energy_ratio_ci_low: float | None = None
    energy_ratio_ci_high: float | None = None


class SuiteResult(BaseModel):
    variants: list[VariantResult]
    comparisons: list[Comparison]
    unpaired: list[str] = Field(default_factory=list)  # baselines without an optimized partner
    wall_s: float = 0.0
    # Where the suite's wall went, one entry per child (a variant's in each round) in the order they started: key, round
    # (bench.isolate.rounds), worker, start_s (from the suite's start; for a child started ahead, when its gate opened),
    # run_s (its isolated run from then until its child exited), ahead_s (what its child ran before, beside the previous
    # variant), late_s (its worker waited for it at the open gate), compare_s (the output check against the baseline),
    # other_s (logging, removing outputs), beside (compare and other ran while the next variant already ran:
    # bench.isolate.workers, rule 5), end_s.
    timeline: list[dict[str, Any]] = Field(default_factory=list)
    # A suite on a Ray cluster: seconds spent joining it before the suite's wall began (connect_s) and leaving
    # it after the wall ended (shutdown_s); empty for a local suite.
    cluster_s: dict[str, float] = Field(default_factory=dict)

    def time_breakdown(self) -> dict[str, Any]:
        """Sums over the timeline: what the workers did, how long they idled, when the first variant began."""
        if not self.timeline:
            return {}
        workers = len({t["worker"] for t in self.timeline})
        run = sum(t["run_s"] for t in self.timeline)
        compare = sum(t["compare_s"] for t in self.timeline)
        beside = [t for t in self.timeline if t.get("beside")]
        compare_beside = sum(t["compare_s"] for t in beside)
        # What ran beside the next variant kept no worker from its next one: not busy time.
        busy = run + sum(t["compare_s"] + t["other_s"] for t in self.timeline if not t.get("beside"))
        return {
            "workers": workers,
            "first_start_s": min(t["start_s"] for t in self.timeline),
            "last_end_s": max(t["end_s"] for t in self.timeline),
            "run_s": run,
            "compare_s": compare,
            "compare_beside_s": compare_beside,  # of compare_s: beside the next variant (workers, rule 5)
            "idle_s": max(workers * self.wall_s - busy, 0.0),  # a worker waiting: for work, or at the start/end
            # children started ahead (workers, rule 1), running beside the previous variant: in no one's busy time
            "ahead_s": sum(t.get("ahead_s", 0.0) for t in self.timeline),
            # ... and, of those, the time their workers waited for them at an open gate (start-up, CUDA context
            # not done when the previous variant was over): inside run_s
            "late_s": sum(t.get("late_s", 0.0) for t in self.timeline),
            # host-clocked measurements waiting to run alone on the host (workers, rule 3)
            "alone_wait_s": sum(t.get("alone_wait_s") or 0.0 for t in self.timeline),
        }

    @property
    def all_ok(self) -> bool:
        """Every variant ok and every pair verified; a variant skipped for what the host lacks is no failure."""
        return all(x.status in ("ok", "skipped") for x in [*self.variants, *self.comparisons])
