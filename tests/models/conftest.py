"""The model tests compute in the test's process: on one intra-op thread (tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_intra_op_thread: None) -> None:
    """The models' passes and their references on one intra-op thread (``one_intra_op_thread``)."""
