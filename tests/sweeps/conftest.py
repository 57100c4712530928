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


@pytest.fixture
def mlflow_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh SQLite MLflow store for the test, run from ``tmp_path`` (where such a store keeps its
    artifacts, ./mlruns), and no run or experiment inherited from the environment."""
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(name, raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri
