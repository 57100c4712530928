"""Results kept on disk when the store fails (bench.record.spool) and uploaded later, once each
(bench.record.upload, ``perflab import``): checked against a real SQLite store, and through the command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from bench.record.spool import Spool, find_spools
from bench.record.tracking import UID
from bench.record.upload import SpoolSink, Uploader, import_spools
from tests.bench.record.test_tracking import HOST, comparison, failed_result, ok_result

REPO = Path(__file__).resolve().parents[3]
_MLFLOW_ENV = ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One SQLite store for the module (a new one runs MLflow's migrations: seconds); each test its experiment."""
    root = tmp_path_factory.mktemp("store")
    with pytest.MonkeyPatch.context() as mp:
        for name in _MLFLOW_ENV:
            mp.delenv(name, raising=False)
        mp.chdir(root)
        uri = f"sqlite:///{root}/mlflow.db"
        yield {"uri": uri, "client": MlflowClient(uri)}


def _spool(tmp_path: Path, experiment: str, uri: str) -> Spool:
    suite = {"tracking_uri": uri, "experiment": experiment, "run_name": "perflab run ch07", "host": HOST,
             "tags": {"perflab.targets": "ch07", "perflab.cold_start": "false"}}  # fmt: skip
    return Spool.create(suite, base=tmp_path / "spool")


def _runs(client: MlflowClient, experiment: str) -> list[Any]:
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id]) if exp else []


def _three(spool: Spool) -> None:
    base = ok_result("baseline", [2.0, 2.2, 2.1, 2.4, 2.3])
    opt = ok_result("optimized", [1.0, 1.1, 0.9, 1.2, 1.05])
    spool.add(base)
    spool.add(opt, comparison(base, opt))
    spool.add(failed_result())


def test_a_spool_holds_what_was_measured_and_reads_back_alike(tmp_path: Path, store: dict[str, Any]) -> None:
    spool = _spool(tmp_path, "spool-read", store["uri"])
    trace = tmp_path / "work" / "profile"
    trace.mkdir(parents=True)
    (trace / "trace.json").write_text('{"traceEvents": []}')
    base = ok_result("baseline", [2.0, 2.2])
    opt = ok_result("optimized", [1.0, 1.1], profile_dir=str(trace))
    spool.add(base)
    spool.add(opt, comparison(base, opt))
    shutil.rmtree(tmp_path / "work")  # the suite's work directory goes; the spool keeps the profile
    again = find_spools(tmp_path / "spool")
    assert len(again) == 1 and again[0].uid == spool.uid
    entries = again[0].entries()
    assert [e.key for e in entries] == ["ch07:transpose:baseline", "ch07:transpose:optimized"]
    assert entries[0].result() == base and entries[0].comparison() is None
    assert entries[1].result() == opt and entries[1].comparison() == comparison(base, opt)  # as measured
    assert entries[0].profile_dir is None and entries[1].profile_dir is not None
    assert json.loads((Path(entries[1].profile_dir) / "trace.json").read_text()) == {"traceEvents": []}
    assert len({e.uid for e in entries}) == 2 and all(e.run_id is None and not e.attempted for e in entries)


def test_an_upload_cut_short_is_finished_without_a_second_run(tmp_path: Path, store: dict[str, Any]) -> None:
    """The first variant was uploaded, the second's run was made before the store went away (left RUNNING,
    half logged), the third never tried: the import fills the second and adds the third, nothing twice."""
    client, exp = store["client"], "spool-resume"
    spool = _spool(tmp_path, exp, store["uri"])
    _three(spool)
    first = Uploader(spool)
    first.attempt()  # everything: then undo the marks of the last two, as a cut-short upload leaves them
    assert first.error is None and first.pending() == 0
    e1, e2, e3 = spool.entries()
    client.delete_run(e3.run_id)  # never made (deleted runs are not searched)
    client.update_run(e2.run_id, status="RUNNING")  # made, not finished
    e2.run_id, e3.run_id, e3.attempted = None, None, False
    e2.save(), e3.save()
    before = {r.info.run_id for r in _runs(client, exp)}
    lines = import_spools(spool.root)
    assert [ok for ok, _ in lines] == [True], lines
    runs = _runs(client, exp)
    variants = [r for r in runs if "perflab.variant" in r.data.tags]
    assert sorted(r.info.run_name for r in variants) == [
        "ch07:softmax:baseline", "ch07:transpose:baseline", "ch07:transpose:optimized"]  # fmt: skip
    assert {r.info.run_id for r in runs} - before == {next(r.info.run_id for r in variants
                                                          if r.info.run_name == "ch07:softmax:baseline")}  # fmt: skip
    assert all(r.info.status in ("FINISHED", "FAILED") and r.info.end_time for r in runs)
    resumed = client.get_run(next(r.info.run_id for r in variants if r.info.run_name.endswith("optimized")))
    assert resumed.data.metrics["speedup"] > 1 and len(client.get_metric_history(resumed.info.run_id, "speedup")) == 1
    assert resumed.data.tags["perflab.baseline_run_id"] == e1.run_id  # its baseline, uploaded by the first pass
    assert not spool.root.exists()  # all of it in the store: removed


def test_an_import_of_what_is_already_in_the_store_logs_nothing(tmp_path: Path, store: dict[str, Any]) -> None:
    """A spool whose marks were lost (the command died after the store took everything) is found, by uid."""
    client, exp = store["client"], "spool-twice"
    spool = _spool(tmp_path, exp, store["uri"])
    _three(spool)
    copy = tmp_path / "copy"
    shutil.copytree(spool.root, copy)
    spool.end("# summary\n", {"n_variants": 3}, failed=False)
    Uploader(spool).attempt()
    logged = {r.info.run_id: r.info.run_name for r in _runs(client, exp)}
    assert len(logged) == 4  # the parent and three variants
    marks = Spool.open(copy)
    marks.suite["attempted"] = True  # as the live command leaves it before its first call to the store
    marks.save_suite()
    for e in marks.entries():
        e.attempted = True
        e.save()
    assert import_spools(copy)[0][0]
    assert {r.info.run_id: r.info.run_name for r in _runs(client, exp)} == logged
    parent = next(r for r in _runs(client, exp) if "perflab.variant" not in r.data.tags)
    assert parent.data.tags["perflab.suite_status"] == "completed" and parent.data.tags[UID] == spool.uid
    assert parent.data.metrics["n_variants"] == 3 and parent.info.status == "FINISHED"


def test_a_killed_suite_is_imported_with_the_summary_of_what_finished(tmp_path: Path, store: dict[str, Any]) -> None:
    client, exp = store["client"], "spool-killed"
    spool = _spool(tmp_path, exp, store["uri"])
    _three(spool)  # no end: the command died before the suite ended
    (spool.root / "0002-ch07-transpose-optimized" / "entry.json").unlink()  # died while writing this one
    assert import_spools(spool.root)[0][0]
    runs = _runs(client, exp)
    parent = next(r for r in runs if "perflab.variant" not in r.data.tags)
    assert len(runs) == 4 and parent.info.status == "FAILED"
    assert parent.data.tags["perflab.suite_status"] == "failed" and parent.data.metrics["n_variants"] == 3
    text = Path(client.download_artifacts(parent.info.run_id, "summary.md", str(tmp_path))).read_text()
    assert "ended before the suite did" in text


def test_the_spool_sink_keeps_results_while_the_store_is_unwritable_and_says_where(tmp_path: Path) -> None:
    spool = _spool(tmp_path, "spool-proc", "sqlite:////proc/perflab-x.db")
    t0 = time.monotonic()
    sink = SpoolSink(spool, Uploader(spool))
    base = ok_result("baseline", [2.0, 2.2])
    spool.add(base)
    assert sink.log_variant(base) == ""
    line = sink.finish("# summary\n", {}, failed=False)
    assert time.monotonic() - t0 < 5  # MLflow's own SQLite retries would take 100 s
    assert line is not None and "cannot be written" in line and "unable to open database file" in line
    assert f"perflab import {spool.root}" in line and "1 of 1 variant results" in line
    assert "\n" not in line and spool.root.is_dir() and (spool.root / "end.json").is_file()
    assert "Traceback" in (spool.root / "errors.log").read_text()  # the full error, for whoever looks


# ---------------------------------------------------------------------------------------- the command


def _perflab(*args: str | Path, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _MLFLOW_ENV}
    env.update({"COLUMNS": "80", "NO_COLOR": "1", "PERFLAB_RESULTS_DIR": str(cwd / "results"),
                "PYTHONPATH": str(REPO)})  # fmt: skip
    return subprocess.run([sys.executable, "-m", "perflab", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.slow  # a whole perflab run, then perflab import: two commands (the spool's own tests above and below)
def test_run_into_an_unwritable_store_prints_the_table_and_one_line_then_import_uploads(
    chapters: Callable[[dict[str, dict[str, Any]]], Path], tmp_path: Path
) -> None:
    root = chapters({"ch07/baseline_x.py": {}, "ch07/optimized_x.py": {}})
    t0 = time.monotonic()
    done = _perflab("run", "--chapters-dir", root, "--device", "cpu", "--iterations", "3", "--warmup", "1",
                    "--tracking-uri", "sqlite:////proc/perflab-x.db", cwd=tmp_path)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert time.monotonic() - t0 < 90, out  # no 100 s of the store's retries
    assert "ch07: baseline vs optimized" in done.stdout and "x:optimized" in done.stdout  # the table
    for noise in ("Traceback", "WARNING", "SQLAlchemy", "Operation will be retried"):
        assert noise not in out, out
    spools = list((tmp_path / "results" / "spool").iterdir())
    assert len(spools) == 1
    where = spools[0].relative_to(tmp_path)
    said = [ln for ln in done.stderr.splitlines() if "results not logged" in ln]
    assert len(said) == 1 and f"`perflab import {where}`" in said[0], done.stderr
    done = _perflab("import", where, "--tracking-uri", f"sqlite:///{tmp_path}/team.db", cwd=tmp_path)
    assert done.returncode == 0 and "2 variant runs in parent run" in done.stdout, done.stdout + done.stderr
    client = MlflowClient(f"sqlite:///{tmp_path}/team.db")
    runs = client.search_runs([client.get_experiment_by_name("Default").experiment_id])
    names = sorted(r.info.run_name for r in runs)
    assert names[1:] == ["ch07:x:baseline", "ch07:x:optimized"] and names[0].startswith("ch07 on cpu, "), names
    assert not spools[0].exists()
    again = _perflab("import", where, cwd=tmp_path)
    assert again.returncode == 2 and "no such directory" in again.stderr


def test_a_sqlite_store_in_a_missing_directory_is_refused_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "sub"
    done = _perflab("run", "-t", "ch7:transpose", "--device", "cpu", "--tracking-uri", f"sqlite:///{missing}/x.db",
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and f"its directory '{missing}' does not exist" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "nonexistent").exists()


def test_an_entry_is_listed_only_once_all_of_it_is_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The uploader's thread lists entries while a worker's thread adds one (a profile being copied): it must never
    see one whose result.json is not written yet."""
    import threading

    import bench.record.spool as spool_module

    copying = threading.Event()

    def slow_copy(src: Path, dst: Path) -> None:
        copying.set()
        time.sleep(0.5)
        shutil.copytree(src, dst)

    monkeypatch.setattr(spool_module, "_copy_tree", slow_copy)
    spool = _spool(tmp_path, "spool-race", "sqlite:///unused.db")
    trace = tmp_path / "profile"
    trace.mkdir()
    (trace / "trace.json").write_text("{}")
    adding = threading.Thread(target=spool.add, args=(ok_result("optimized", [1.0], profile_dir=str(trace)),))
    adding.start()
    assert copying.wait(10)
    assert spool.entries() == []  # being written
    adding.join()
    [entry] = spool.entries()
    assert (entry.dir / "result.json").is_file() and entry.profile_dir is not None


@pytest.mark.parametrize("raw", ["abc", "-1", "inf", "nan"])
def test_a_bad_store_wait_is_refused_naming_it(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.errors import PerflabError
    from bench.record.upload import store_wait_s

    monkeypatch.setenv("PERFLAB_STORE_WAIT_S", raw)
    with pytest.raises(PerflabError, match=rf"^PERFLAB_STORE_WAIT_S='{raw}' is not a number of seconds >= 0$"):
        store_wait_s()
    monkeypatch.setenv("PERFLAB_STORE_WAIT_S", "2.5")
    assert store_wait_s() == 2.5
    monkeypatch.delenv("PERFLAB_STORE_WAIT_S")
    assert store_wait_s() == 30.0


def test_run_checks_the_store_wait_before_the_suite(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")} | {"PERFLAB_STORE_WAIT_S": "soon"}
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "-t", "ch7:transpose", "--tracking-uri",
                           f"sqlite:///{tmp_path}/x.db"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2 and "PERFLAB_STORE_WAIT_S='soon'" in done.stderr
    assert not (tmp_path / "x.db").exists() and "transpose" not in done.stdout
