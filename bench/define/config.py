"""BenchmarkConfig: the one source of defaults, and the one function that layers configuration.

Layers, later wins: defaults → suite config (``--config`` file or API) → the benchmark's own ``get_config()`` → CLI
flags. Only fields a layer *explicitly sets* override earlier layers (``iterations`` in ``get_config()`` leaves the
user's ``--warmup``). ``$PERFLAB_ROUNDS`` (N) sets ``min_rounds`` and ``max_rounds`` to N where neither the suite
config nor a flag sets either: every pair in N rounds (a quick smoke check, a test suite not about rounds), a
benchmark's own rounds giving way to it (``benchmark_layer``). ``$PERFLAB_MIN_WARMUP_SECONDS`` sets
``min_warmup_seconds`` where no layer sets it (a test suite whose many small variants need no 0.3 s warm-up each).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bench.errors import ConfigError, unparsable

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")

TimingMode = Literal["auto", "cpu", "cuda_event", "cuda_graph", "triton", "pytorch"]
ProfileMode = Literal["torch", "ncu", "nsys", "all", "memcheck", "racecheck", "sanitize"]
NcuPreset = Literal["minimal", "roofline", "full"]


class BenchmarkConfig(BaseModel):
    """How one variant is run and measured. Every field has a default; see ``resolve_config``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    # Timed calls per variant (samples). None = adaptive: sample until the relative standard error
    # of the median is below noise_target (at least min_samples and min_measure_seconds, at most
    # max_measure_seconds). A number given here or with --iterations always wins.
    iterations: int | None = Field(None, ge=1, le=1_000_000)
    # Adaptive stopping: target relative standard error of the median (0.005 = 0.5 %).
    noise_target: float = Field(0.005, gt=0, lt=1)
    min_samples: int = Field(10, ge=1, le=1_000_000)
    min_measure_seconds: float = Field(0.1, ge=0)
    # Upper bound on adaptive sampling; also capped at 80 % of the measurement stage's limit.
    max_measure_seconds: float = Field(1.0, gt=0)
    # Samples a measurement takes before max_measure_seconds may stop it (not past 80 % of the measurement stage's
    # limit): a call of seconds measured in rounds gets a median of a few per round, not of one.
    min_measure_samples: int = Field(1, ge=1, le=1000)
    # Untimed calls before measurement, at least (JIT/compile, autotuning, allocator warm-up): warm-up
    # goes on until the calls are steady and min_warmup_seconds have passed.
    warmup: int = Field(5, ge=0, le=1_000_000)
    # Warm-up lasts at least this long, whatever ``warmup`` says, and then until calls are steady
    # (bench.measure.clocks.warm_up). None: 0.3 s on the host's clock (on the H100 host a fresh process ran a CPU
    # op ~1.6x slower for its first ~0.3 s), 0.05 s on GPU clocks.
    min_warmup_seconds: float | None = Field(None, ge=0, le=60)
    # Seed for random, numpy, torch and CUDA, set in the child before setup().
    seed: int = Field(42, ge=0, le=2**32 - 1)
    # Deterministic algorithms (torch.use_deterministic_algorithms, cuDNN deterministic,
    # CUBLAS_WORKSPACE_CONFIG). Off by default because it changes kernels and therefore timings.
    deterministic: bool = False
    # "auto" (cuda when available, else cpu), "cpu", "cuda" or "cuda:N" ("cuda:N" only with world_size 1).
    device: str = "auto"
    # Processes the variant runs as (bench.isolate.ranks). 1: one process, as every variant. N > 1: N ranks
    # launched through torch.distributed, rank r on cuda:r with NCCL, or N gloo processes on a CPU; its
    # benchmark code runs on every rank, each sample is the slowest rank's (a collective ends when its last
    # rank does). Skipped, with the reason, on a host with fewer than N GPUs.
    world_size: int = Field(1, ge=1, le=64)
    # GPUs the variant's one process uses (cuda:0 ... cuda:gpus-1: a copy between two GPUs, a model split over
    # them). gpus > 1 runs it as a variant of several ranks is run: alone on the host, in a fresh interpreter that
    # sees every worker's GPU (bench.isolate.ranks); a host with fewer skips it, with the reason.
    gpus: int = Field(1, ge=1, le=64)
    # Record peak/allocated/reserved CUDA memory (GPU) or peak RSS (CPU) for the variant.
    enable_memory_tracking: bool = True
    # Profile each variant after its timed run, in a separate child (bench/profile/tools.py): the timed
    # numbers never carry profiler overhead. Off by default (a profile costs a child per tool).
    enable_profiling: bool = False
    # Which profilers: "torch" (torch.profiler trace + top ops), "ncu" (Nsight Compute counters),
    # "nsys" (Nsight Systems timeline) or "all"; "memcheck", "racecheck" (compute-sanitizer) or "sanitize" (both:
    # bench/profile/sanitize.py). A tool not on the PATH is skipped with the reason.
    profile_mode: ProfileMode = "torch"
    # Nsight Compute sections: "minimal" (time, DRAM/SM throughput, occupancy, L2 hit rate: one or
    # two replay passes per kernel), "roofline" (+ SpeedOfLight roofline charts), "full" (--set full,
    # dozens of passes per kernel: slow).
    ncu_preset: NcuPreset = "minimal"
    # Stage limits, enforced by the parent process (each multiplied by timeout_multiplier).
    # startup: interpreter start, harness + torch import, benchmark module import.
    startup_timeout_seconds: float = Field(120.0, gt=0)
    # setup: get_benchmark(), get_config(), setup(); also bounds output check and teardown.
    setup_timeout_seconds: float = Field(30.0, gt=0)
    warmup_timeout_seconds: float = Field(15.0, gt=0)
    # the warm-up's first call until it returns (at least the warm-up's limit): a compile there (torch.compile,
    # Triton's JIT and autotuning) takes 18 s for a two-layer MLP from a cold cache on a busy 2-core host.
    first_call_timeout_seconds: float = Field(120.0, gt=0)
    measurement_timeout_seconds: float = Field(15.0, gt=0)
    # profiling: the profiled calls of a profile child (under ncu, every kernel is replayed per pass).
    profiling_timeout_seconds: float = Field(180.0, gt=0)
    # Scales every stage limit (slow machines, sanitizers, interpreters).
    timeout_multiplier: float = Field(1.0, gt=0, le=1000)
    # Clock: "auto" picks cuda_event on GPU, cpu (perf_counter) otherwise; cuda_graph, triton
    # (do_bench) and pytorch (torch.utils.benchmark) on request (bench/measure/clocks.py says what each does).
    timing_mode: TimingMode = "auto"
    # Which of the two measured times a pair's speedup uses: "cold" (the primary time_*: single calls, L2
    # flushed, launch latency hidden) or "batch" (batch_time_*: back-to-back calls in a CUDA-graph replay,
    # warm L2) — batch for launch-bound microbenchmarks whose point is a stream of calls.
    speedup_time: Literal["cold", "batch"] = "cold"
    # Also measure back-to-back calls (batch_time_*) after the cold samples.
    measure_batch: bool = True
    # Also measure the GPU's energy per call after the batch: NVML's board energy counter while the calls run
    # back to back for energy_seconds (bench/measure/energy.py; energy_per_call_mj, power_w, a pair's
    # energy_ratio). Off by default: it adds energy_seconds to every GPU variant. One-GPU variants only.
    measure_energy: bool = False
    # The energy window's length: the counter steps every ~20-100 ms, and each step after the first 0.25 s gives
    # a sample (at least 3 are needed).
    energy_seconds: float = Field(2.0, ge=0.5, le=60.0)
    # Spread of one run's median between processes (relative standard deviation), added to the speedup's
    # bootstrap interval: samples of one process cannot show it. None: by clock (bench.measure.compare).
    run_noise: float | None = Field(None, ge=0, lt=1)
    # A pair is measured in rounds (bench.isolate.rounds): baseline and optimized alternate, each round a fresh
    # child per side, so load that comes and goes on the host hits both sides; the speedup's interval is taken
    # over the rounds' ratios and carries their spread (run_noise is then not added). At least min_rounds, then
    # more until every pair of the example is within ±speedup_precision, clearly decided or within ±noise_threshold,
    # at most max_rounds and no round begun that would end past max_rounds_seconds of the example's rounds (below
    # min_rounds, twice that: a pair of calls that slow may stop at two, its interval of one degree of freedom wide).
    # min_rounds=max_rounds=1: one child per side, the interval from its samples plus run_noise. Read from the
    # variants' effective configs.
    min_rounds: int = Field(3, ge=1, le=100)
    max_rounds: int = Field(8, ge=1, le=100)
    # Half-width of the speedup's 95 % interval that settles a pair (0.02: ±2 %).
    speedup_precision: float = Field(0.02, gt=0, lt=1)
    max_rounds_seconds: float = Field(120.0, gt=0)
    # A verdict's noise threshold (0.01: ±1 %): two processes of the same code differ by a fraction of a percent
    # (memory placement, clocks; an A/A pair on the H200 read 0.9998x [0.9997, 0.9998]), which is no verdict. A
    # speedup reads "faster" only when its interval lies above 1 + noise_threshold, "slower" only below
    # 1 / (1 + noise_threshold) (a band symmetric in log space), else "no significant difference"; a pair's rounds
    # also stop once its interval lies within the band. 0: the plain rule (above or below 1.0). Memory and quality
    # verdicts, readings of what the pair changes rather than of a clock, keep the plain rule (bench.measure.compare).
    noise_threshold: float = Field(0.01, ge=0, lt=1)
    # Which children time a pair's later rounds: "fresh" (a new child per side in every round: the interval carries
    # set-up-to-set-up variation as well), "kept" (each side's child of round 0, parked between its rounds with its
    # set-up held: start-up, set-up and compiles paid once; bench.isolate.kept), "auto" (kept where a fresh child of
    # the example's slowest variant would pay KEEP_SETUP_S or more again: start-up, set-up, a first call's excess, a
    # token-generating variant's warm-up generations after its first call; else fresh). Children of one process on
    # one device only (no ranks); a kept token-generating child reports each round's own generations and warms up
    # with the round's first call alone. Parked children's memory at most half the device's.
    round_children: Literal["auto", "fresh", "kept"] = "auto"
    # A round in which either side's measurement saw other processes take the host's CPU ("host busy"): "leave_out"
    # (not in the pair's speedup while two calm rounds remain; min_rounds then counts calm rounds:
    # bench.isolate.rounds.undisturbed) or "keep" (every round counts: a host whose load is part of what is measured).
    busy_rounds: Literal["leave_out", "keep"] = "leave_out"
    # Compile caches (Inductor's, Triton's) persist under the user's cache directory (~/.cache/perflab/) across
    # variants and runs unless TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR are set; the first call's time is still
    # recorded apart. True: each child compiles from an empty cache (time a cold compile). Suite or CLI layer only:
    # the environment is made before the benchmark's get_config() runs.
    cold_compile: bool = False
    # Initial length of the spin kernel that holds the stream while the host enqueues a sample (GPU
    # event clocks); it doubles whenever a sample shows the host outran it.
    launch_spin_ms: float = Field(0.05, ge=0.001, le=50.0)
    # GPU event clocks: after each sample, leave the GPU idle for this multiple of the sample's span
    # (host sleep); 0 = back to back. Back to back, a long kernel runs at whatever clock the power
    # controller has settled on (an 8192^3 bf16 matmul on the H100 at its 700 W cap: CV of 7 medians
    # 0.52-2.31 %, +1.7-6.8 % against ncu's kernel time); with a gap as long as the sample each one
    # starts from the same state: CV 0.04 %, +0.1 % against ncu (docs/results/h100.md).
    # The measurement's wall time stays bounded by min/max_measure_seconds: fewer samples, not longer.
    # 0 measures the sustained, power-capped regime instead.
    sample_gap: float = Field(1.0, ge=0.0, le=100.0)
    # Flush L2 before every GPU sample, outside the timed window. False = warm-cache numbers,
    # and the result says so.
    flush_l2: bool = True
    # Percentiles reported besides p25/p50/p75/p90/p95/p99 (linear interpolation of raw samples).
    percentiles: list[float] = Field(default_factory=lambda: [25.0, 50.0, 75.0, 90.0, 95.0, 99.0])
    # Relative-error tolerance for the output check; None = the default for the output dtype.
    rtol: float | None = Field(None, gt=0, lt=1)
    # How the two sides' outputs are compared (bench.measure.verify): "exact", tensor by tensor at rtol (exactly
    # for integers); "greedy_tokens", for a token-generating benchmark whose get_output() returns [tokens,
    # runner_up, gap, offsets]: tokens exactly, except that a request may part from the baseline's at a near-tie
    # (the baseline's top two within GAP_TOL, the optimized side taking its runner-up) and is compared up to there.
    # "quality", for a lossy optimization (early exit, dropped tokens): the outputs are not compared; the pair is
    # verified when the optimized side's mean metrics()["quality"] over the baseline's, the 95 % interval's low
    # end, is at least ``quality_floor`` (bench.measure.quality).
    verify: Literal["exact", "greedy_tokens", "quality"] = "exact"
    # With verify="quality": the least optimized / baseline ratio of mean quality a pair is verified at.
    quality_floor: float | None = Field(None, gt=0, le=1)
    # Smoke sizes (tiny inputs) for examples; None = smoke on CPU, full size on GPU.
    smoke: bool | None = None
    # Fill floating outputs with NaN before measurement and require the timed calls to overwrite
    # them: catches results precomputed in setup and reused (INTEGRITY #6).
    poison_outputs: bool = True
    # After the measurement: a call from the set-up state again when the timed calls changed the tensors
    # set up in setup(), and one call on changed inputs whose output must follow (bench.measure.guard). Off only
    # for a benchmark whose inputs cannot be changed (the result says it was off).
    check_inputs: bool = True

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        if not _DEVICE_RE.match(value):
            raise ValueError(f"device={value!r} is not one of 'auto', 'cpu', 'cuda', 'cuda:N'")
        return value

    @model_validator(mode="after")
    def _check_placement(self) -> BenchmarkConfig:
        if self.world_size > 1 and ":" in self.device:
            raise ValueError(
                f"device={self.device!r} with world_size={self.world_size}: rank r runs on cuda:r; "
                "use device='cuda' or 'auto'"
            )
        if self.min_rounds > self.max_rounds:
            raise ValueError(
                f"min_rounds={self.min_rounds} is above max_rounds={self.max_rounds}; use min_rounds <= max_rounds"
            )
        if self.world_size > 1 and self.gpus > 1:
            raise ValueError(
                f"world_size={self.world_size} with gpus={self.gpus}: either ranks of one GPU each (world_size) "
                "or one process of several GPUs (gpus)"
            )
        return self

    @field_validator("percentiles")
    @classmethod
    def _check_percentiles(cls, value: list[float]) -> list[float]:
        bad = [p for p in value if not 0.0 <= p <= 100.0]
        if bad:
            raise ValueError(f"percentiles must lie in [0, 100], got {bad}")
        return sorted(set(value))

    def stage_limit(self, stage: str, call_s: float = 0.0) -> float:
        """Seconds allowed for ``stage`` (already multiplied by ``timeout_multiplier``). ``call_s``: the call's time,
        once known; a stage that makes a bounded number of calls (``STAGE_CALLS``) is allowed at least that many."""
        base = {
            "startup": self.startup_timeout_seconds,
            "setup": self.setup_timeout_seconds,
            "warmup": self.warmup_timeout_seconds,
            "first_call": max(self.warmup_timeout_seconds, self.first_call_timeout_seconds),
            "measurement": self.measurement_timeout_seconds,
            "profiling": self.profiling_timeout_seconds,
            "check": self.setup_timeout_seconds,
            "batch": self.measurement_timeout_seconds,
            "energy": self.measurement_timeout_seconds + 2 * self.energy_seconds,
            "recheck": self.setup_timeout_seconds,
            "teardown": self.setup_timeout_seconds,
        }
        if stage not in base:
            raise ConfigError(f"stage={stage!r} has no limit; known stages: {', '.join(base)}")
        return max(base[stage], STAGE_CALLS.get(stage, 0) * call_s) * self.timeout_multiplier


def limit_field(stage: str) -> str:
    """The config field a stage's limit in seconds comes from (``setup_timeout_seconds`` for the set-up, the check,
    the recheck and the teardown), to name in a timeout's message."""
    return {"check": "setup", "recheck": "setup", "teardown": "setup", "batch": "measurement", "energy": "measurement",
            "first_call": "first_call"}.get(stage, stage) + "_timeout_seconds"  # fmt: skip


# Calls each stage is allowed at least, whatever its limit in seconds, once the call's time is known (its first call's,
# then the measured median): the warm-up makes the first call and at least two windows' worth (bench.measure.clocks),
# the measurement at least one sample, the check 5 of a slow call (bench.isolate.produced: a settle call, two rounds
# of a call and a call with get_output()), the batch up to 9 call-times (a graph's warm-up call, capture replay, a
# spin-sizing span, a sample, the idle gaps), the recheck the restore comparison's rounds (4 calls; up to 32 with their
# set-ups when the set-up state looks slower: bench.isolate.recheck, which cuts its rounds within 70 % of the limit) and
# a call on changed inputs: a 4.5 s call's batch would pass the 15 s of a measurement limit, a 6 s call's warm-up (three
# calls at least) its 15 s, and a 3 s serving call's 16 rounds a 60 s recheck (ch16 paged_kv on the H200).
STAGE_CALLS = {"warmup": 6, "measurement": 3, "check": 12, "batch": 12, "recheck": 50}
# The default noise threshold, for a verdict judged without a config (a result logged before the field, two suites'
# speedups, a sweep's recommendation): bench.measure.stats.significance.
NOISE_THRESHOLD: float = BenchmarkConfig.model_fields["noise_threshold"].default
# round_children="auto" keeps a pair's children where a fresh one of the slowest variant would pay this long again
# (bench.isolate.rounds.repaid_s; in three suites of chapters 13-20's pairs on the H200, set-up summed to 46-68 % of
# the wall; a fresh child of ch13 activation_offload's optimized side paid a 10 s first call of a 0.5 s one).
KEEP_SETUP_S = 1.0
# What a later round's child does not do, on top of the suite's and the CLI's layers (its first round did): no input
# recheck, energy, NaN poison or profile (bench.isolate.rounds; a kept child applies it to its own config).
TIMING_ONLY = {"check_inputs": False, "measure_energy": False, "poison_outputs": False, "enable_profiling": False}


Layer = BenchmarkConfig | Mapping[str, Any] | None


def host_clocked(config: Any, device: str | None = None) -> bool:
    """Timed on the host's wall clock: any variant on a CPU device (``device``: the resolved one, e.g. "cpu"
    or "cuda:0"; a config's own may say "auto"), and on a GPU the ``cpu`` and ``pytorch`` clocks. Its samples
    include the host's CPU work, so anything else on the host can move them (bench.isolate.workers, rule 3): on the
    2-core CI machine a 2-thread op read 16 ms instead of 0.03 ms while MLflow imported beside it (OpenMP
    waits for a thread the scheduler took away)."""
    on = device or getattr(config, "device", None) or "auto"
    if on.startswith("cpu"):
        return True
    return getattr(config, "timing_mode", None) in ("cpu", "pytorch")


def explicit_fields(layer: Layer) -> dict[str, Any]:
    if layer is None:
        return {}
    if isinstance(layer, BenchmarkConfig):
        return layer.model_dump(include=layer.model_fields_set)
    if isinstance(layer, Mapping):
        unknown = sorted(set(layer) - set(BenchmarkConfig.model_fields))
        if unknown:
            known = ", ".join(BenchmarkConfig.model_fields)
            raise ConfigError(f"unknown config field(s) {unknown}; accepted fields: {known}")
        return dict(layer)
    raise ConfigError(f"config layer must be a BenchmarkConfig or a mapping, got {type(layer).__name__}")


ROUNDS_FIELDS = frozenset({"min_rounds", "max_rounds"})  # $PERFLAB_ROUNDS sets both, where a layer sets neither


def benchmark_layer(own: Layer) -> dict[str, Any]:
    """A benchmark's own ``get_config()`` layer as ``resolve_config`` takes it: its rounds left out where
    ``$PERFLAB_ROUNDS`` is set (every pair in N rounds, the serving chapters' too); the suite's and flags' win."""
    fields = explicit_fields(own)
    if os.environ.get("PERFLAB_ROUNDS", "").strip():
        fields = {k: v for k, v in fields.items() if k not in ROUNDS_FIELDS}
    return fields


def resolve_config(*layers: Layer) -> BenchmarkConfig:
    """Merge layers in order (defaults → config → get_config() → CLI), later explicit fields win; a bad value is a
    ConfigError naming the field and the value."""
    merged: dict[str, Any] = {}
    for layer in layers:
        fields = explicit_fields(layer)
        _follow_rounds(merged, fields)
        merged.update(fields)
    kept = set(merged) | (ROUNDS_FIELDS if ROUNDS_FIELDS & set(merged) else set())  # rounds: both, or neither
    merged.update({k: v for k, v in environment_defaults().items() if k not in kept})
    try:
        return BenchmarkConfig(**merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _follow_rounds(merged: dict[str, Any], fields: dict[str, Any]) -> None:
    """A layer that sets one end of the rounds' range alone (``--set max_rounds=2``) moves the other end where an
    earlier layer or the default left it on the wrong side (the serving chapters' ``min_rounds=5``, the default
    3): the later layer wins, as with any field. Both ends in one layer are that layer's to get right."""
    low, high = fields.get("min_rounds"), fields.get("max_rounds")
    now = {k: merged.get(k, BenchmarkConfig.model_fields[k].default) for k in ROUNDS_FIELDS}
    if type(high) is int and low is None and type(now["min_rounds"]) is int and now["min_rounds"] > high:
        merged["min_rounds"] = high
    if type(low) is int and high is None and type(now["max_rounds"]) is int and now["max_rounds"] < low:
        merged["max_rounds"] = low


def environment_defaults() -> dict[str, Any]:
    """What the environment changes in the defaults (each where no layer sets it; module docstring); a bad value
    is a ConfigError naming it."""
    out: dict[str, Any] = {}
    raw = os.environ.get("PERFLAB_ROUNDS", "").strip()
    if raw:
        if not raw.isdigit() or not 1 <= int(raw) <= 100:
            raise ConfigError(f"PERFLAB_ROUNDS={raw!r} is invalid: a whole number of rounds per pair from 1 to 100")
        out.update(min_rounds=int(raw), max_rounds=int(raw))
    raw = os.environ.get("PERFLAB_MIN_WARMUP_SECONDS", "").strip()
    if raw:
        try:
            seconds = float(raw)
        except ValueError:
            seconds = -1.0
        if not 0.0 <= seconds <= 60.0:  # NaN included
            raise ConfigError(f"PERFLAB_MIN_WARMUP_SECONDS={raw!r} is invalid: seconds from 0 to 60")
        out["min_warmup_seconds"] = seconds
    return out


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "config"
        named = f"{field}={err.get('input')!r}"
        msg = err["msg"].removeprefix("Value error, ")  # a validator's own words (pydantic's prefix off)
        parts.append(msg if msg.startswith(named) else f"{named} is invalid: {msg}")  # the value named once
    return "invalid benchmark config: " + "; ".join(parts)


CONFIG_FILE_HOLDS = "expected a mapping of BenchmarkConfig fields, such as 'iterations: 20' (.json, .yaml, .yml, .toml)"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a suite config layer from a .json, .yaml/.yml or .toml file (a flat mapping of fields)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    import tomllib

    import yaml

    suffix = p.suffix.lower()
    kind = {".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}.get(suffix)
    if kind is None:
        raise ConfigError(f"config file {str(p)!r}: suffix {suffix!r} not accepted; use .json, .yaml, .yml, .toml")
    try:
        text = p.read_text()  # a file not in UTF-8: UnicodeDecodeError, a ValueError as well
        data = json.loads(text) if kind == "JSON" else tomllib.loads(text) if kind == "TOML" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:  # json's and tomllib's errors are ValueErrors
        raise unparsable("config file", p, kind, exc, CONFIG_FILE_HOLDS) from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping of config fields, got {type(data).__name__}")
    explicit_fields(data)  # reject unknown fields early, naming them
    return data
