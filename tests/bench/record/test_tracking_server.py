"""The MLflow contract through a tracking server (PostgreSQL backend, artifacts proxied: ``mlflow_server``, started
by deploy/team-server.sh in tests/services.py): the same suite reads back from the server exactly as from SQLite,
and a server killed in the middle of a suite, down for 30 s, loses nothing and gets nothing twice."""

from __future__ import annotations

import filecmp
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from bench.record.spool import Spool
from bench.record.upload import Uploader, import_spools
from tests.bench.record.test_tracking import HOST, comparison, ok_result
from tests.services import REPO, Team, client_env

# Differ between two stores by nature: run ids (and the tags naming them), the stores' own bookkeeping.
_IDS = {"mlflow.parentRunId", "perflab.baseline_run_id"}
# A suite's parent run is named for its chapters, device and start (bench.record.contract.suite_name).
SUITE = re.compile(r"ch07 on cpu, \d{4}-\d\d-\d\d \d\d:\d\d")


def _perflab(*args: str | Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "perflab", *map(str, args)], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip


def _env(results: Path, **extra: str) -> dict[str, str]:
    env = client_env()  # the server's credentials kept
    env.update({"PERFLAB_RESULTS_DIR": str(results), "COLUMNS": "80", "NO_COLOR": "1", "PYTHONPATH": str(REPO),
                "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false", **extra})  # fmt: skip
    return env


def _runs(client: MlflowClient, experiment: str) -> dict[str, Any]:
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    assert len({r.info.run_name for r in runs}) == len(runs), Counter(r.info.run_name for r in runs)
    return {r.info.run_name: r for r in runs}


def _download(client: MlflowClient, run_id: str, to: Path) -> Path:
    to.mkdir(parents=True)
    return Path(client.download_artifacts(run_id, "", str(to)))


def test_a_suite_reads_back_from_the_server_field_by_field_as_from_sqlite(
    mlflow_server: Team, chapters: Callable[..., Path], tmp_path: Path
) -> None:
    """One real suite (a pair profiled with torch.profiler, a failing pair), kept in a spool, uploaded once to the
    server and once to SQLite: every run's name, status, times, tags, metrics, params and artifact files agree."""
    root = chapters({"ch07/baseline_x.py": {}, "ch07/optimized_x.py": {},
                     "ch07/baseline_bad.py": {"FAULT": ("setup", "raise")}, "ch07/optimized_bad.py": {}})  # fmt: skip
    results = tmp_path / "results"
    run = _perflab("run", "--chapters-dir", root, "--device", "cpu", "--iterations", "3", "--warmup", "1",
                   "--profile", "--profile-mode", "torch", "--tracking-uri", "sqlite:////proc/perflab-x.db",
                   env=_env(results))  # fmt: skip
    out, err = run.communicate(timeout=300)
    assert run.returncode == 1 and "results not logged" in err, out + err
    [spool] = (results / "spool").iterdir()
    copy = tmp_path / "copy"
    shutil.copytree(spool, copy)
    assert import_spools(spool, tracking_uri=mlflow_server.uri, experiment="contract")[0][0]
    sqlite = f"sqlite:///{tmp_path}/mlflow.db"
    assert import_spools(copy, tracking_uri=sqlite, experiment="contract")[0][0]
    served, filed = MlflowClient(mlflow_server.uri), MlflowClient(sqlite)
    a, b = _runs(served, "contract"), _runs(filed, "contract")
    [suite] = [n for n in a if SUITE.fullmatch(n)]  # named for when the suite began, wherever it was uploaded
    assert sorted(a) == sorted(b) == sorted(["ch07:bad:baseline", "ch07:bad:optimized", "ch07:x:baseline",
                                             "ch07:x:optimized", suite])  # fmt: skip
    for name, ra in a.items():
        rb = b[name]
        assert (ra.info.status, ra.info.start_time, ra.info.end_time) == (rb.info.status, rb.info.start_time,
                                                                          rb.info.end_time), name  # fmt: skip
        assert {k: v for k, v in ra.data.tags.items() if k not in _IDS} == {
            k: v for k, v in rb.data.tags.items() if k not in _IDS}, name  # fmt: skip
        assert ra.data.metrics == rb.data.metrics and ra.data.params == rb.data.params, name
        da = _download(served, ra.info.run_id, tmp_path / "a" / name.replace(":", "-"))
        db = _download(filed, rb.info.run_id, tmp_path / "b" / name.replace(":", "-"))
        files = sorted(str(p.relative_to(da)) for p in da.rglob("*") if p.is_file())
        assert files == sorted(str(p.relative_to(db)) for p in db.rglob("*") if p.is_file()), name
        assert all(filecmp.cmp(da / f, db / f, shallow=False) for f in files), name
    profiled = tmp_path / "a" / "ch07-x-optimized"
    assert {"profile/trace.json.gz", "result.json", "manifest.json"} <= {str(p.relative_to(profiled)) for p in
                                                                      profiled.rglob("*")}  # fmt: skip
    assert a["ch07:x:optimized"].data.tags["perflab.baseline_run_id"] == a["ch07:x:baseline"].info.run_id
    assert a["ch07:bad:baseline"].data.tags["perflab.status"] == "failed"
    assert a[suite].data.tags["perflab.suite_status"] == "completed"


def test_the_server_killed_mid_suite_and_down_30_s_loses_nothing_and_logs_nothing_twice(
    mlflow_server: Team, chapters: Callable[..., Path], tmp_path: Path
) -> None:
    names = "abcdefgh"
    root = chapters({f"ch07/{k}_{n}.py": {"SETUP_SLEEP": 1.5} for n in names for k in ("baseline", "optimized")})
    results = tmp_path / "results"
    env = _env(results, MLFLOW_TRACKING_URI=mlflow_server.uri, PERFLAB_STORE_WAIT_S="120")
    run = _perflab("run", "--chapters-dir", root, "--device", "cpu", "--iterations", "3", "--warmup", "1",
                   "--experiment", "outage", env=env)  # fmt: skip
    client = MlflowClient(mlflow_server.uri)
    deadline = time.monotonic() + 120
    while not _logged(client, "outage"):  # the first result is in the server
        assert time.monotonic() < deadline and run.poll() is None, run.communicate()
        time.sleep(0.2)
    mlflow_server.kill_mlflow()
    down = time.monotonic()
    time.sleep(30)
    assert run.poll() is None, "the suite goes on while the server is down"
    mlflow_server.recipe("start", "mlflow")
    restarted = time.monotonic() - down
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, out + err
    for noise in ("Traceback", "WARNING", "Retrying", "urllib3", "Max retries"):
        assert noise not in out + err, out + err
    assert "MLflow parent run" in out and not list((results / "spool").iterdir())  # all uploaded: spool removed
    runs = _runs(client, "outage")  # (asserts one run per name)
    [suite] = [n for n in runs if SUITE.fullmatch(n)]
    expected = {f"ch07:{n}:{k}" for n in names for k in ("baseline", "optimized")} | {suite}
    assert set(runs) == expected and restarted >= 30
    variants = [r for r in runs.values() if "perflab.variant" in r.data.tags]
    assert len({r.data.tags["perflab.uid"] for r in variants}) == 16
    assert all(r.info.status == "FINISHED" and r.data.tags["perflab.status"] == "ok" for r in variants)
    for r in variants:  # each metric logged once, however many tries it took
        assert len(client.get_metric_history(r.info.run_id, "time_median_ms")) == 1
    parent = runs[suite]
    assert parent.info.status == "FINISHED" and parent.data.metrics["n_variants"] == 16
    assert parent.data.metrics["n_verified"] == 8


def test_a_variant_goes_up_in_five_requests_to_a_server_whose_workers_send_without_delay(
    mlflow_server: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What keeps a variant's upload short (scripts/store_overhead.py): the run created with its tags, one
    log_batch, result.json and manifest.json, the run ended; no lookup of the run (its artifact location comes
    with it) nor of anything else. The recipe runs uvicorn's workers on a loop without Nagle's delay
    (deploy/uvicorn_nodelay.py)."""
    import psutil
    import requests

    spool = Spool.create({"tracking_uri": mlflow_server.uri, "experiment": "requests", "run_name": "requests",
                          "host": HOST, "tags": {}}, base=tmp_path / "spool")  # fmt: skip
    uploader = Uploader(spool)
    uploader.attempt()  # the parent run
    base, opt = ok_result("baseline", [2.0, 2.2, 2.1]), ok_result("optimized", [1.0, 1.1, 0.9])
    spool.add(base)
    spool.add(opt, comparison(base, opt))
    sent: list[str] = []
    send = requests.Session.send

    def counted(session: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> Any:
        sent.append(f"{request.method} {(request.path_url or '').split('?')[0].rsplit('/', 2)[-2:][-1]}")
        return send(session, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", counted)
    uploader.attempt()
    assert uploader.error is None and all(e.run_id for e in spool.entries())
    per_variant = ["POST create", "POST log-batch", "PUT result.json", "PUT manifest.json", "POST update"]
    assert sorted(sent) == sorted(per_variant * 2)
    server = psutil.Process(int((mlflow_server.dir / "mlflow.pid").read_text()))
    workers = [p.cmdline() for p in server.children(recursive=True) if "uvicorn" in " ".join(p.cmdline())]
    assert workers and all("uvicorn_nodelay:NoDelayLoop" in " ".join(c) for c in workers), workers


def _logged(client: MlflowClient, experiment: str) -> bool:
    try:
        exp = client.get_experiment_by_name(experiment)
        return exp is not None and bool(client.search_runs([exp.experiment_id], "tags.`perflab.status` = 'ok'"))
    except Exception:
        return False


@pytest.fixture(autouse=True)
def _quiet_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # import_spools sets MLflow's retry settings for this process (bench.record.upload.quiet_store): not for others
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
