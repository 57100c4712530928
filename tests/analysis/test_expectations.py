"""analysis/expectations.py and ``perflab expectations``: proof of benefit against reviewed files."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from analysis.expectations import check, update
from perflab import cli
from tests.analysis.synthetic import Store, draw, log_suite, result

EXPECTED = {  # written by hand for the test, as a reviewer would commit them
    "hardware": "NVIDIA H100 80GB HBM3",
    "chapter": "ch07",
    "examples": {
        "good": {"optimized": {"speedup": 2.0, "run_id": "r-good"}},
        "slow": {"optimized": {"speedup": 2.0, "run_id": "r-slow"}},
        "wrong": {"optimized": {"speedup": 3.0, "run_id": "r-wrong"}},
        "hung": {"optimized": {"speedup": 1.5, "run_id": "r-hung"}},
    },
}


@pytest.fixture(scope="module")
def suite(store: Store) -> dict[str, Any]:
    """good ~2x (expected 2x), slow ~1.5x (expected 2x), wrong ~3x unverified, hung timed out, new ~2x
    without an expectation."""
    results = [
        result("ch07:good:baseline", draw(2.0, 1)), result("ch07:good:optimized", draw(1.0, 2)),
        result("ch07:slow:baseline", draw(1.5, 3)), result("ch07:slow:optimized", draw(1.0, 4)),
        result("ch07:wrong:baseline", draw(3.0, 5)), result("ch07:wrong:optimized", draw(1.0, 6)),
        result("ch07:hung:baseline", draw(1.0, 7)), result("ch07:hung:optimized", None, status="timeout"),
        result("ch07:new:baseline", draw(2.0, 8)), result("ch07:new:optimized", draw(1.0, 9)),
    ]  # fmt: skip
    parent, ids = log_suite(store, "expectations", results, verified={"ch07:wrong:optimized": False})
    return {"parent": parent, "ids": ids}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "expectations" / "nvidia-h100-80gb-hbm3" / "ch07.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(EXPECTED))
    return tmp_path / "expectations"


def test_check_gives_each_status(suite: dict[str, Any], root: Path, store: Store) -> None:
    parent, rows = check(suite["parent"], root, 0.05, store.uri)
    assert parent == suite["parent"]
    by = {r.example: r for r in rows}
    assert {e: r.status for e, r in by.items()} == {
        "good": "pass", "slow": "regressed", "wrong": "failed", "hung": "failed", "new": "needs-work"
    }  # fmt: skip
    assert by["slow"].expected == 2.0 and by["slow"].speedup == pytest.approx(1.5, rel=0.02)
    assert "by 2" in by["slow"].notes  # ~25 % short
    assert "not verified" in by["wrong"].notes and "timeout" in by["hung"].notes
    # a looser tolerance lets the 1.5x through: the threshold is really applied
    assert {r.example: r.status for r in check(suite["parent"], root, 0.3, store.uri)[1]}["slow"] == "pass"


def test_cli_check_writes_proof_of_benefit_csv(suite: dict[str, Any], root: Path, store: Store, tmp_path: Path) -> None:
    args = ["expectations", "check", "--run-id", suite["parent"], "--dir", str(root), "--out", str(tmp_path),
            "--tracking-uri", store.uri]  # fmt: skip
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 1, res.output  # regressed and failed rows
    rows = list(csv.DictReader(io.StringIO((tmp_path / "proof_of_benefit.csv").read_text())))
    assert tuple(rows[0])[:6] == ("chapter", "example", "variant", "status", "speedup", "expected")
    assert sorted(r["status"] for r in rows) == ["failed", "failed", "needs-work", "pass", "regressed"]
    assert "proof_of_benefit.csv" in {f.path for f in store.client.list_artifacts(suite["parent"])}


def test_update_refuses_unverified_and_failed(suite: dict[str, Any], tmp_path: Path, store: Store) -> None:
    for target in ("ch07:wrong", "ch07:hung"):
        with pytest.raises(ValueError, match="refusing"):
            update(suite["parent"], target, tmp_path, store.uri)
    assert not list(tmp_path.rglob("*.yaml"))
    res = CliRunner().invoke(cli.app, ["expectations", "update", "--run-id", suite["parent"], "--example",
                                       "ch7:wrong", "--dir", str(tmp_path), "--tracking-uri", store.uri])  # fmt: skip
    assert res.exit_code == 2 and "refusing" in res.output


def test_update_records_the_commit_perflab_stated(suite: dict[str, Any], tmp_path: Path, store: Store) -> None:
    """A copied tree's stale .git fools MLflow's commit tag; the suite's perflab.git_commit wins."""
    before = store.client.get_run(suite["parent"]).data.tags.get("perflab.git_commit")
    store.client.set_tag(suite["parent"], "perflab.git_commit", "stated0123")
    try:
        doc = yaml.safe_load(update(suite["parent"], "ch07:good", tmp_path, store.uri).read_text())
    finally:
        if before is None:
            store.client.delete_tag(suite["parent"], "perflab.git_commit")
        else:
            store.client.set_tag(suite["parent"], "perflab.git_commit", before)
    assert doc["examples"]["good"]["optimized"]["commit"] == "stated0123"


def test_update_writes_exactly_one_example(suite: dict[str, Any], root: Path, store: Store) -> None:
    path = update(suite["parent"], "ch7:slow", root, store.uri)
    doc = yaml.safe_load(path.read_text())
    assert path == root / "nvidia-h100-80gb-hbm3" / "ch07.yaml"
    assert doc["examples"]["good"] == EXPECTED["examples"]["good"]  # others untouched
    assert doc["examples"]["hung"] == EXPECTED["examples"]["hung"]
    slow = doc["examples"]["slow"]["optimized"]
    run = store.client.get_run(suite["ids"]["ch07:slow:optimized"])
    assert slow["speedup"] == run.data.metrics["speedup"]  # exact, not rounded or clamped
    assert slow["run_id"] == run.info.run_id and slow["parent_run_id"] == suite["parent"]
    assert set(doc["examples"]) == set(EXPECTED["examples"])
    parent_tags = store.client.get_run(suite["parent"]).data.tags
    assert slow["commit"] == parent_tags.get("perflab.git_commit", run.data.tags.get("mlflow.source.git.commit"))
    # now recorded from this very run, the same suite passes
    assert {r.example: r.status for r in check(suite["parent"], root, 0.05, store.uri)[1]}["slow"] == "pass"
