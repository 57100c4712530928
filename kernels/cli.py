"""``perflab kernels`` (registered by bench.cli's plugin hook). Cheap to import: torch/triton load inside."""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(app: Any) -> None:
    """Nothing yet: the command lands with the cases."""
