"""Services the tests start and stop themselves (fixtures, imported by tests/conftest.py).

* ``team``: PostgreSQL started by the team recipe, ``deploy/team-server.sh start db`` (Debian's postgresql
  package; as root it runs as ``postgres`` or ``nobody``, since initdb refuses root), once per session;
  ``postgres`` is the URL of its Optuna database (no password in it: ``PGPASSFILE``, set for the session, holds
  it), ``mlflow_server`` the recipe's MLflow tracking server on it (``start mlflow``: PostgreSQL backend,
  artifacts proxied by the server, basic-auth on) with a user the recipe made, whose credentials the session's
  environment carries (``MLFLOW_TRACKING_USERNAME``/``PASSWORD``; ``client_env`` keeps them for a child). A
  test may kill the server and start it again.
* ``ray_cluster``: a local Ray cluster, a head without GPUs and two worker nodes with one GPU each, simulated
  (``num_gpus`` on the CPU), once per module.

Each skips, saying what to install, where PostgreSQL, psycopg or Ray is missing; ``.ci/run`` and the test
extra install them.
"""

from __future__ import annotations

import configparser
import glob
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "deploy" / "team-server.sh"
SERVER_NAME = "perflab-store"  # the name the test's GPU host (tests/deploy/test_team_server.py) knows it by
SERVER_ADDRESS = "10.213.37.1"  # the server's end of that host's link (a veth pair the test makes)
CREDENTIALS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")


def client_env() -> dict[str, str]:
    """This process's environment without MLflow's settings, the server's credentials kept: a child's base."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_") or k in CREDENTIALS}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _missing() -> str | None:
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb") and shutil.which("initdb") is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql"
    if importlib.util.find_spec("psycopg") is None:
        return "no PostgreSQL driver (psycopg): pip install -e '.[test]'"
    if importlib.util.find_spec("flask_wtf") is None:
        return "no Flask-WTF (MLflow's basic-auth app): pip install -e '.[test]'"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: initdb refuses root"
    return None


@dataclass
class Team:
    """The recipe's services in a directory of their own, on free ports."""

    dir: Path
    pg_port: int
    port: int

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def optuna_url(self) -> str:
        return f"postgresql://perflab_optuna@127.0.0.1:{self.pg_port}/optuna"

    def env(self) -> dict[str, str]:
        # All interfaces (the recipe's default): the test's second host reaches it at SERVER_ADDRESS.
        return {**os.environ, "PERFLAB_TEAM_DIR": str(self.dir), "PERFLAB_PG_PORT": str(self.pg_port),
                "PERFLAB_MLFLOW_PORT": str(self.port), "PERFLAB_MLFLOW_WORKERS": "2",
                "PERFLAB_SERVER_NAME": SERVER_NAME, "PERFLAB_SERVER_ADDRESS": SERVER_ADDRESS}  # fmt: skip

    def credentials(self, user: str) -> dict[str, str]:
        """``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` of a user the recipe made (``user add``), made when new."""
        path = self.dir / "users" / f"{user}.credentials"
        if not path.exists():
            self.recipe("user", "add", user)
        parser = configparser.ConfigParser()
        parser.read(path)
        return {k: parser["mlflow"][k.lower()] for k in CREDENTIALS}

    def recipe(self, *args: str) -> str:
        done = subprocess.run(["bash", str(RECIPE), *args], env=self.env(), capture_output=True, text=True,
                              timeout=180)  # fmt: skip
        assert done.returncode == 0, f"team-server.sh {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    def kill_mlflow(self) -> None:
        """The server dies at once (SIGKILL to its process group): no goodbye to its clients."""
        pid = int((self.dir / "mlflow.pid").read_text())
        os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            try:
                os.waitpid(pid, os.WNOHANG)  # not ours (the recipe started it), but reap it if it is
            except ChildProcessError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"MLflow server {pid} still runs after SIGKILL")


@pytest.fixture(scope="session")
def team() -> Iterator[Team]:
    missing = _missing()
    if missing:
        pytest.skip(missing)
    # Under /tmp itself: the server's user (nobody, under root) must reach it, and pytest's base is 0700.
    d = Path(tempfile.mkdtemp(prefix="perflab-team-"))
    t = Team(d, free_port(), free_port())
    t.recipe("start", "db")
    try:
        with pytest.MonkeyPatch.context() as mp:  # Optuna's password, for this process and its children
            mp.setenv("PGPASSFILE", str(d / "optuna.pgpass"))
            yield t
    finally:
        subprocess.run(["bash", str(RECIPE), "stop"], env=t.env(), capture_output=True, timeout=120)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres(team: Team) -> str:
    """The URL of a PostgreSQL database for Optuna studies (the recipe's ``optuna`` database)."""
    return team.optuna_url


@pytest.fixture(scope="session")
def mlflow_server(team: Team) -> Iterator[Team]:
    """The recipe's MLflow tracking server, running, a user's credentials in this process's environment."""
    team.recipe("start", "mlflow")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in team.credentials("tester").items():
            mp.setenv(k, v)
        yield team


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[tuple[Any, list[Any]]]:
    """(cluster, [worker node, worker node]): ``cluster.address`` for ``perflab run --ray``; a node may be killed
    with ``cluster.remove_node(node, allow_graceful=False)``. Nodes are declared dead 3 s after they stop
    answering (Ray's default: 30 s)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed: pip install -e '.[test]' (or '.[ray]')")
    from ray.cluster_utils import Cluster

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), saved) if p)  # the nodes import this tree
    try:
        cluster, nodes = _start_ray_cluster(Cluster)
        try:
            yield cluster, nodes
        finally:
            cluster.shutdown()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _start_ray_cluster(cluster_type: Any, tries: int = 3) -> tuple[Any, list[Any]]:
    """The head and two worker nodes, started again (all of them) when a node does not come up: Ray gives a raylet
    30 s to register ("timed out during startup ... or the GCS has become overloaded"), which a loaded 2-core host
    can exceed. Every try's error is in the one raised after the last."""
    fast = {"health_check_period_ms": 500, "health_check_failure_threshold": 4, "health_check_initial_delay_ms": 500}
    errors = []
    for _ in range(tries):
        cluster = cluster_type(initialize_head=False)
        try:
            cluster.add_node(num_cpus=1, num_gpus=0, include_dashboard=False, _system_config=fast)
            nodes = [cluster.add_node(num_cpus=2, num_gpus=1) for _ in range(2)]
            cluster.wait_for_nodes()
            return cluster, nodes
        except Exception as exc:  # noqa: BLE001 — Ray raises a bare Exception for a node that did not start
            errors.append(f"{type(exc).__name__}: {exc}")
            cluster.shutdown()
    raise RuntimeError(f"the test Ray cluster did not start in {tries} tries: " + "; ".join(errors))
