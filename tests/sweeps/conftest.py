"""Sweeps write their default storage and data under the results directory: a temporary one in tests,
never the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def results_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path_factory.mktemp("perflab-results")
    monkeypatch.setenv("PERFLAB_RESULTS_DIR", str(d))
    return d
