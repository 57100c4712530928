"""What a benchmark may ask the harness while it runs: the device, the seed, smoke or full size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from bench.config import BenchmarkConfig, resolve_config

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


@dataclass(frozen=True)
class RunContext:
    device: torch.device
    seed: int
    smoke: bool  # tiny inputs: CPU runs, CI, interpreters
    config: BenchmarkConfig

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def size(self, full: T, smoke: T) -> T:
        """``smoke`` at smoke size, else ``full``: the one place an example picks its problem size."""
        return smoke if self.smoke else full


_current: RunContext | None = None


def resolve_device(spec: str) -> torch.device:
    import torch

    if spec == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device={spec!r} requested but CUDA is not available on this machine")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    return device


def make_context(config: BenchmarkConfig) -> RunContext:
    device = resolve_device(config.device)
    smoke = config.smoke if config.smoke is not None else device.type != "cuda"
    return RunContext(device=device, seed=config.seed, smoke=smoke, config=config)


def set_context(ctx: RunContext | None) -> None:
    global _current
    _current = ctx


def context() -> RunContext:
    """The running variant's context; outside the harness, one built from the defaults."""
    global _current
    if _current is None:
        _current = make_context(resolve_config())
    return _current
