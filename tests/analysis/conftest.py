"""Fixtures for analysis/ tests: one temporary SQLite MLflow store per test module.

Creating a store runs MLflow's migrations (seconds), so a module logs its synthetic suites once
(builders in ``synthetic.py``) and its tests read them back.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mlflow import MlflowClient

from tests.analysis.synthetic import Store

_MLFLOW_ENV = ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    root = tmp_path_factory.mktemp("mlflow")
    with pytest.MonkeyPatch.context() as mp:
        for name in _MLFLOW_ENV:
            mp.delenv(name, raising=False)
        mp.chdir(root)  # a store opened at MLflow's default by mistake would land here, not in the repo
        uri = f"sqlite:///{root}/mlflow.db"
        yield Store(uri=uri, root=root, client=MlflowClient(tracking_uri=uri))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _MLFLOW_ENV:
        monkeypatch.delenv(name, raising=False)
