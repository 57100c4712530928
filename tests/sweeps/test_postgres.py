"""Several sweep workers on one study in a real PostgreSQL server that this test starts and stops.

Two worker processes run one grid; one is killed mid-trial. The other fails the dead worker's trial
through the heartbeat, runs the queued retry, and every configuration ends measured exactly once.
Needs Debian's postgresql package (initdb, pg_ctl; .ci/run installs it) and psycopg (the test extra).
"""

from __future__ import annotations

import collections
import glob
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeps.search import config_of
from sweeps.storage import make_storage


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _as_server_user(cmd: list[str]) -> list[str]:
    """initdb refuses root: run the server as 'nobody' then (its files are chowned to it)."""
    return ["runuser", "-u", "nobody", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    bin_dir = _binaries()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
    if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is None:
        pytest.skip("no PostgreSQL driver (psycopg): pip install -e '.[test]'")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: initdb refuses root")
    root = Path(tempfile.mkdtemp(prefix="perflab-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "nobody")
    with socket.socket() as s:  # a free port on the loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = root / "data"
    run = {"check": True, "capture_output": True, "timeout": 60}
    subprocess.run(_as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-U", "perflab", "--auth=trust",
                                    "-E", "UTF8", "--no-sync"]), **run)  # type: ignore[call-overload]  # fmt: skip
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w",
                                    "-o", options, "start"]), **run)  # type: ignore[call-overload]  # fmt: skip
    try:
        yield f"postgresql://perflab@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def _worker(url: str, study: str, marks: Path, delay: float) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.Popen([sys.executable, "-m", "tests.sweeps._worker", url, study, str(marks), str(delay)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def test_two_workers_share_a_study_and_lose_nothing_when_one_dies(postgres: str, tmp_path: Path) -> None:
    import optuna

    from tests.sweeps._worker import CONFIG

    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = _worker(postgres, "shared", marks, 0.6), _worker(postgres, "shared", marks, 0.6)
    deadline = time.monotonic() + 60
    while len(list(marks.glob(f"{a.pid}-*.start"))) < 2:  # A finished one trial and is inside its second
        assert time.monotonic() < deadline and a.poll() is None, a.stdout.read() if a.stdout else ""  # type: ignore[union-attr]
        time.sleep(0.02)
    a.send_signal(signal.SIGKILL)
    a.wait(10)
    killed = [p.stem for p in marks.glob(f"{a.pid}-*.start") if not p.with_suffix(".done").exists()]
    assert len(killed) == 1, "the worker was killed mid-trial"
    out, _ = b.communicate(timeout=90)
    assert b.returncode == 0, out.decode()

    study = optuna.load_study(study_name="shared", storage=make_storage(postgres))
    ok = collections.Counter()
    for t in study.trials:
        if t.user_attrs.get("status") == "ok":
            c = config_of(t)
            ok[(c["batch_size"], c["num_workers"])] += 1
    space = {(p["batch_size"], p["num_workers"]) for p in CONFIG.space(cuda=False).points()}
    assert set(ok) == space and set(ok.values()) == {1}  # every configuration measured, each exactly once
    _, batch, workers = killed[0].split("-")
    dead = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL and "status" not in t.user_attrs]
    assert [(config_of(t)["batch_size"], config_of(t)["num_workers"]) for t in dead] == [(int(batch), int(workers))]
    retried = [t for t in study.trials if t.system_attrs.get("failed_trial") == dead[0].number]
    assert len(retried) == 1 and retried[0].user_attrs["status"] == "ok"  # the dead worker's trial, run by B
    assert len(list(marks.glob(f"{b.pid}-{batch}-{workers}.done"))) == 1
