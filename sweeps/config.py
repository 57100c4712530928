"""SweepConfig: the search space and how each trial is measured; one source of defaults.

Layers, later wins: defaults → the ``benchmark:`` section of ``--config FILE`` (YAML) → CLI flags.
``sweeps/default.yaml`` is the shipped file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bench.errors import ConfigError, unparsable
from sweeps.space import DEFAULTS, PARAMS, Space, usable_cores, worker_ladder

__all__ = ["DEFAULT_CONFIG", "SweepConfig", "load_sweep_config", "parse_baseline"]

DEFAULT_CONFIG = Path(__file__).with_name("default.yaml")


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # What is trained: a built-in (sweeps.builtins.BUILTINS) or "module:function" / "file.py:function".
    workload: str = "medium"
    workload_args: dict[str, Any] = Field(default_factory=dict)  # handed to the workload as settings.args
    # The search space: every combination is one configuration (grid) or a candidate (smart, pareto).
    batch_sizes: list[int] = Field(default_factory=lambda: [32, 64, 128, 256, 512, 1024, 2048, 4096])
    # DataLoader workers: by default a ladder up to the host's usable cores (0, 2, 4, ..., cores).
    num_workers_options: list[int] = Field(default_factory=lambda: worker_ladder(usable_cores()))
    test_mixed_precision: bool = True  # False: AMP off only; True: both off and on
    amp_dtype: Literal["bfloat16", "float16"] = "bfloat16"  # float16 adds a GradScaler
    test_pin_memory: bool = True  # both off and on on a GPU; pinning is never in a CPU's space
    # Micro-batches per optimizer step; the batch size stays the effective batch (what the learning
    # rate sees), so accumulation trades speed for memory at the same optimisation.
    grad_accum_options: list[int] = Field(default_factory=lambda: [1])
    test_channels_last: bool = False  # NHWC convolutions (tensor cores): off and on
    test_compile: bool = False  # torch.compile off and on (its compile time falls in the warm-up)
    prefetch_factor_options: list[int] = Field(default_factory=lambda: [2])  # with workers only
    test_persistent_workers: bool = False  # False: persistent workers only; True: both
    # Measured steps per trial, after warmup_steps untimed ones (worker start-up, allocator growth).
    steps_per_test: int = Field(50, ge=1)
    warmup_steps: int = Field(5, ge=0)
    device: Literal["auto", "cuda", "cpu"] = "auto"
    size: Literal["auto", "full", "smoke"] = "auto"  # built-ins: auto = full on a GPU, smoke on a CPU
    # Simulated device memory (GB) for the memory wall on a CPU; None = only the real device's wall.
    max_memory_gb: float | None = Field(None, gt=0)
    trial_timeout_s: float = Field(300.0, gt=0)  # a trial still running then is killed: status timeout
    # No trial starts after this many seconds of the sweep (the running one finishes); the table and
    # recommendation cover what was measured, and the same study name resumes the rest. None: no limit.
    time_budget_s: float | None = Field(None, gt=0)
    learning_rate: float = Field(1e-3, gt=0)  # at reference_batch_size; scaled by sqrt(batch / reference)
    reference_batch_size: int = Field(256, ge=1)
    # The recommendation keeps this memory margin: at most this % of the device.
    max_memory_pct: float = Field(80.0, gt=0, le=100)
    # Diagnosis only (never a filter): a GPU busy at least this % of the step is compute-bound.
    min_gpu_util_pct: float = Field(70.0, ge=0, le=100)
    # Diagnosis: a GPU busy less than this % of the step is host/launch-bound (Python, kernel launches).
    host_bound_util_pct: float = Field(30.0, ge=0, le=100)
    # Pruning (smart, pareto; never the grid, whose table must be complete): after prune_after_steps
    # measured steps, a trial below prune_ratio x the throughput of a finished one that used no more
    # memory is stopped (status pruned). 0 steps: never.
    prune_after_steps: int = Field(5, ge=0)
    prune_ratio: float = Field(0.5, gt=0, lt=1)
    # Verification: the recommended and the baseline configuration, each re-run this many times in
    # fresh processes (0: no verification); the baseline is the user's current configuration.
    verify_repeats: int = Field(5, ge=0)
    # Re-measures (ranking rounds, verification repeats): each run's timed steps go on past steps_per_test
    # until this many seconds, so its window spans epoch boundaries and host noise alike (a 20-step window
    # of a data-bound job lasts under a second). 0: steps_per_test steps only.
    remeasure_seconds: float = Field(3.0, ge=0)
    # Ranking: the rank_top fastest configurations within the memory margin are re-run in fresh
    # processes, round after round (at most rank_rounds), until the leader's interval clears the
    # runner-up's or the rounds are spent (a tie). 0 rounds: the single trials decide.
    rank_top: int = Field(3, ge=1)
    rank_rounds: int = Field(4, ge=0)
    # Bottleneck probe of the recommendation: the data path alone per worker count and the step alone
    # on a batch kept on the device, each timed for about probe_seconds. False: no probe.
    probe: bool = True
    probe_seconds: float = Field(2.0, gt=0)
    baseline: dict[str, Any] = Field(
        default_factory=lambda: {"batch_size": 32, "num_workers": 0, "amp": False, "pin_memory": False}
    )
    # Several workers on one study (RDB storage): a worker records a heartbeat every interval; a trial
    # whose worker fell silent for the grace period is failed and re-queued, at most max_retry times.
    heartbeat_interval_s: int = Field(5, ge=1)
    heartbeat_grace_s: int = Field(20, ge=2)
    max_retry: int = Field(2, ge=0)
    seed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _preset_is_workload(cls, data: Any) -> Any:
        """``preset:`` (sweeps before own workloads) names a built-in workload."""
        if isinstance(data, dict) and "preset" in data:
            data = dict(data)
            preset = data.pop("preset")
            data.setdefault("workload", preset)
        return data

    @field_validator("batch_sizes", "num_workers_options", "grad_accum_options", "prefetch_factor_options")
    @classmethod
    def _sorted_unique(cls, v: list[int], info: ValidationInfo) -> list[int]:
        """One bound per field, said once: worker counts may be 0, the rest count samples or batches (>= 1). The
        value itself is added by ``load_sweep_config``'s line, so the message does not repeat it."""
        if not v:
            raise ValueError("must list at least one value")
        least = 0 if info.field_name == "num_workers_options" else 1
        if min(v) < least:
            raise ValueError(f"values must be >= {least}")
        return sorted(set(v))

    @model_validator(mode="after")
    def _compile_warms_up(self) -> SweepConfig:
        if self.test_compile and self.warmup_steps < 2:
            raise ValueError(f"test_compile needs warmup_steps >= 2 (compilation runs in the first steps), "
                             f"but got warmup_steps={self.warmup_steps}")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _accumulation_divides(self) -> SweepConfig:
        """A grad_accum value that divides none of the batch sizes adds no configuration (``Space.canonical``):
        asked for but never measured, it is a mistake said before anything runs, not a sweep of 0 trials."""
        for k in self.grad_accum_options:
            if not any(b % k == 0 for b in self.batch_sizes):
                raise ValueError(f"grad_accum {k} divides none of the batch sizes {self.batch_sizes} (each "
                                 f"configuration's batch splits into {k} equal micro-batches): use batch sizes that "
                                 f"are multiples of {k}, or another --grad-accum")  # fmt: skip
        return self

    def left_out(self) -> str | None:
        """Which batch sizes some grad_accum value does not divide (those pairs are no configuration), as a note
        for the sweep's start, or None when every pair is one."""
        parts = [f"grad_accum {k} with batch {', '.join(map(str, bad))}" for k in self.grad_accum_options
                 if (bad := [b for b in self.batch_sizes if b % k])]  # fmt: skip
        return f"left out (the batch is not a multiple of grad_accum): {'; '.join(parts)}" if parts else None

    @field_validator("baseline")
    @classmethod
    def _known_knobs(cls, v: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(v) - set(PARAMS))
        if unknown:
            raise ValueError(f"baseline has unknown setting(s) {unknown}; known: {', '.join(PARAMS)}")
        return v

    def space(self, cuda: bool = True) -> Space:
        """The search space on this device: pinning is offered only on a GPU (it speeds host→GPU copies)."""
        both = [False, True]
        return Space({
            "batch_size": self.batch_sizes, "num_workers": self.num_workers_options,
            "amp": both if self.test_mixed_precision else [False],
            "pin_memory": both if self.test_pin_memory and cuda else [False],
            "grad_accum": self.grad_accum_options,
            "channels_last": both if self.test_channels_last else [False],
            "compile": both if self.test_compile else [False],
            "prefetch_factor": self.prefetch_factor_options,
            "persistent_workers": both if self.test_persistent_workers else [True],
        })  # fmt: skip

    def grid_size(self, cuda: bool = True) -> int:
        return self.space(cuda).size()

    def baseline_params(self, cuda: bool = True) -> dict[str, Any]:
        """The baseline as a full configuration: unnamed knobs at their plain values (no AMP, no pinning,
        no accumulation, no channels_last, no compile)."""
        plain = {"amp": False, "pin_memory": False, **DEFAULTS}
        p = {**plain, **self.baseline}
        if "batch_size" not in p or "num_workers" not in p:
            raise ConfigError(f"baseline needs batch_size and num_workers, but got {self.baseline}")
        if p["pin_memory"] and not cuda:
            raise ConfigError("baseline pin_memory=true on the CPU: pinning exists only for a GPU")
        c = Space({k: [v] for k, v in p.items()}).canonical(p)
        if c is None:
            b, k = p["batch_size"], p["grad_accum"]
            raise ConfigError(f"baseline batch_size {b} is not a multiple of grad_accum {k}")
        return c

    @classmethod
    def from_space(cls, values: dict[str, list[Any]], seed: int = 0) -> SweepConfig:
        """The config whose space (on a GPU) is ``values`` (a replay rebuilds a measured grid's)."""
        fields: dict[str, Any] = {
            "batch_sizes": values["batch_size"],
            "num_workers_options": values["num_workers"],
            "grad_accum_options": values.get("grad_accum", [1]),
            "prefetch_factor_options": values.get("prefetch_factor", [2]),
            "seed": seed,
        }
        for name, flag, alone in (("amp", "test_mixed_precision", False), ("pin_memory", "test_pin_memory", False),
                                  ("channels_last", "test_channels_last", False), ("compile", "test_compile", False),
                                  ("persistent_workers", "test_persistent_workers", True)):  # fmt: skip
            v = values.get(name, [alone])
            if v not in ([alone], [False, True]):
                raise ConfigError(f"{name} values {v} cannot be a sweep's space ([{alone}] or [False, True]) ({flag})")
            fields[flag] = v == [False, True]
        return cls.model_validate(fields)


def parse_baseline(text: str) -> dict[str, Any]:
    """``batch_size=64,num_workers=2,amp=true`` → a dict of typed values (ints and booleans)."""
    out: dict[str, Any] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or name not in PARAMS:
            raise ConfigError(
                f"--baseline item {item!r} is not NAME=VALUE with NAME one of {', '.join(PARAMS)} "
                "(e.g. batch_size=64,num_workers=2,amp=false)"
            )
        if value in ("true", "false", "yes", "no", "on", "off"):
            out[name] = value in ("true", "yes", "on")
        elif value.isdigit():
            out[name] = int(value)
        else:
            raise ConfigError(f"--baseline {name}={value!r}: expected an integer or true/false")
    return out


def _parse_ints(text: str, flag: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r} is not a list of integers such as '32,64,128' or '32 64 128'") from None


def load_sweep_config(path: str | Path | None = None, **overrides: Any) -> SweepConfig:
    """Defaults → ``benchmark:`` of the YAML file → ``overrides`` (None values ignored; list flags may be strings)."""
    data: dict[str, Any] = {}
    if path is not None:
        import yaml

        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"sweep config {str(p)!r} does not exist; see {DEFAULT_CONFIG} for the layout")
        try:
            doc = yaml.safe_load(p.read_text()) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as exc:  # a typo, or a job file given as the config
            raise unparsable("sweep config", p, "YAML", exc,
                             f"expected a top-level 'benchmark:' mapping (see {DEFAULT_CONFIG})") from None  # fmt: skip
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmark"), dict):
            raise ConfigError(f"sweep config {str(p)!r} needs a top-level 'benchmark:' mapping (see {DEFAULT_CONFIG})")
        data.update(doc["benchmark"])
    for key, flag in (("batch_sizes", "--batch-sizes"), ("num_workers_options", "--num-workers"),
                      ("grad_accum_options", "--grad-accum")):  # fmt: skip
        if isinstance(overrides.get(key), str):
            overrides[key] = _parse_ints(overrides[key], flag)
    if overrides.get("preset") is not None:  # a later layer's preset is its workload
        overrides["workload"] = overrides.pop("preset")
    overrides.pop("preset", None)
    if isinstance(overrides.get("baseline"), str):
        overrides["baseline"] = parse_baseline(overrides["baseline"])
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return SweepConfig(**data)
    except ValidationError as exc:  # one line per sweep: "field: what is wrong (got value)"
        raise ConfigError(f"invalid sweep config: {'; '.join(map(_problem, exc.errors()))}") from None


def _problem(error: Any) -> str:
    """One pydantic error as ``field: what is wrong (got value)``; an unknown key (a typo, ``batch_size:``) with
    the accepted key nearest it and all of them, since the key's value says nothing about what was meant."""
    import difflib

    where = ".".join(map(str, error["loc"]))
    if error["type"] == "extra_forbidden" and len(error["loc"]) == 1:
        known = sorted(SweepConfig.model_fields)
        close = difflib.get_close_matches(str(error["loc"][0]), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key {where!r}{hint} (accepted: {', '.join(known)})"
    msg = error["msg"].removeprefix("Value error, ")  # our own validators' ValueErrors: the message is enough
    if not where:  # a check across fields: its message names them, and its input (the whole config) is not shown
        return msg
    return f"{where}: {msg} (got {error.get('input')!r})"
