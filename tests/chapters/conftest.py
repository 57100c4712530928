"""Fixtures shared by the chapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.config import resolve_config
from bench.context import make_context, set_context


@pytest.fixture
def cpu_smoke() -> Iterator[None]:
    """A harness context on the CPU at smoke size, as a chapter variant sees it in a CPU run."""
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    try:
        yield
    finally:
        set_context(None)
