"""SweepConfig: the search space and how each trial is measured; one source of defaults.

Layers, later wins: defaults → the ``benchmark:`` section of ``--config FILE`` (YAML) → CLI flags.
``sweeps/default.yaml`` is the shipped file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bench.errors import ConfigError
from sweeps.workload import PRESETS

__all__ = ["DEFAULT_CONFIG", "SweepConfig", "load_sweep_config"]

DEFAULT_CONFIG = Path(__file__).with_name("default.yaml")


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The search space: every combination is one configuration (grid) or a candidate (smart).
    batch_sizes: list[int] = Field(default_factory=lambda: [32, 64, 128, 256, 512, 1024, 2048, 4096])
    num_workers_options: list[int] = Field(default_factory=lambda: [0, 2, 4, 8])
    test_mixed_precision: bool = True  # False: AMP off only; True: both off and on (bf16 autocast)
    test_pin_memory: bool = True  # False: pinning off only; True: both (pinning only matters on a GPU)
    # Measured steps per trial, after warmup_steps untimed ones (worker start-up, allocator growth).
    steps_per_test: int = Field(50, ge=1)
    warmup_steps: int = Field(5, ge=0)
    device: Literal["auto", "cuda", "cpu"] = "auto"
    preset: str = "medium"  # a key of sweeps.workload.PRESETS
    # Simulated device memory (GB) for the memory wall on a CPU; None = only the real device's wall.
    max_memory_gb: float | None = Field(None, gt=0)
    trial_timeout_s: float = Field(300.0, gt=0)  # a trial still running then is killed: status timeout
    # No trial starts after this many seconds of the sweep (the running one finishes); the table and
    # recommendation cover what was measured, and the same study name resumes the rest. None: no limit.
    time_budget_s: float | None = Field(None, gt=0)
    learning_rate: float = Field(1e-3, gt=0)  # at reference_batch_size; scaled by sqrt(batch / reference)
    reference_batch_size: int = Field(256, ge=1)
    # Recommendation filters: memory at most this % of the device, GPU utilisation at least this %.
    max_memory_pct: float = Field(80.0, gt=0, le=100)
    min_gpu_util_pct: float = Field(70.0, ge=0, le=100)
    # Diagnosis: a GPU busy less than this % of the step is host/launch-bound (Python, kernel launches).
    host_bound_util_pct: float = Field(30.0, ge=0, le=100)
    seed: int = 0

    @field_validator("batch_sizes", "num_workers_options")
    @classmethod
    def _sorted_unique(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("must list at least one value")
        if min(v) < 0:
            raise ValueError(f"values must be >= 0, but got {v}")
        return sorted(set(v))

    @field_validator("batch_sizes")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if min(v) < 1:
            raise ValueError(f"batch sizes must be >= 1, but got {v}")
        return v

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"unknown preset {v!r}; choose one of {sorted(PRESETS)}")
        return v

    def space(self) -> dict[str, list[Any]]:
        """Optuna's categorical search space (values in ascending order)."""
        return {
            "batch_size": list(self.batch_sizes),
            "num_workers": list(self.num_workers_options),
            "amp": [False, True] if self.test_mixed_precision else [False],
            "pin_memory": [False, True] if self.test_pin_memory else [False],
        }

    def grid_size(self) -> int:
        n = 1
        for values in self.space().values():
            n *= len(values)
        return n


def _parse_ints(text: str, flag: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r} is not a comma-separated list of integers such as '32,64,128'") from None


def load_sweep_config(path: str | Path | None = None, **overrides: Any) -> SweepConfig:
    """Defaults → ``benchmark:`` of the YAML file → ``overrides`` (None values ignored; list flags may be strings)."""
    data: dict[str, Any] = {}
    if path is not None:
        import yaml

        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"sweep config {str(p)!r} does not exist; see {DEFAULT_CONFIG} for the layout")
        doc = yaml.safe_load(p.read_text()) or {}
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmark"), dict):
            raise ConfigError(f"sweep config {str(p)!r} needs a top-level 'benchmark:' mapping (see {DEFAULT_CONFIG})")
        data.update(doc["benchmark"])
    for key, flag in (("batch_sizes", "--batch-sizes"), ("num_workers_options", "--num-workers")):
        if isinstance(overrides.get(key), str):
            overrides[key] = _parse_ints(overrides[key], flag)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return SweepConfig(**data)
    except ValidationError as exc:
        raise ConfigError(f"invalid sweep config: {exc}") from None
