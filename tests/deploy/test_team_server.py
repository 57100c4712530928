"""deploy/team-server.sh as a team meets it: a GPU host on a network of its own (a namespace the test makes, a
veth link to this one) logs a suite through the name and address the recipe prints, with a user's credentials;
without them it is refused; a stranger on the server's host reads nothing; no secret shows in ``ps``, MLflow or a
log."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.services import CREDENTIALS, REPO, SERVER_ADDRESS, SERVER_NAME, Team, client_env

NS = f"perflab-gpu{os.getpid()}"
LINK = f"plv{os.getpid()}"  # plvPIDa here, plvPIDb in the namespace (interface names: 15 characters at most)
HOST_ADDRESS = SERVER_ADDRESS.rsplit(".", 1)[0] + ".2"  # the GPU host's end of the link (a /30)
PROBE = "/api/2.0/mlflow/experiments/search?max_results=1"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def gpu_host() -> Iterator[str]:
    """A network namespace linked to this one by a veth pair, the server's name in its /etc/hosts (as a GPU host's
    DNS would have it): the namespace's name, for ``ip netns exec``."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("a second network namespace needs root and iproute2 (apt-get install iproute2)")
    hosts = Path("/etc/netns") / NS
    try:
        _ip("netns", "add", NS)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"no network namespace can be made here: {exc.stderr.strip()}")
    try:
        _ip("link", "add", f"{LINK}a", "type", "veth", "peer", "name", f"{LINK}b")
        _ip("link", "set", f"{LINK}b", "netns", NS)
        _ip("addr", "add", f"{SERVER_ADDRESS}/30", "dev", f"{LINK}a")
        _ip("link", "set", f"{LINK}a", "up")
        _ip("-n", NS, "addr", "add", f"{HOST_ADDRESS}/30", "dev", f"{LINK}b")
        _ip("-n", NS, "link", "set", f"{LINK}b", "up")
        _ip("-n", NS, "link", "set", "lo", "up")
        hosts.mkdir(parents=True, exist_ok=True)
        hosts.joinpath("hosts").write_text(f"127.0.0.1 localhost\n{SERVER_ADDRESS} {SERVER_NAME}\n")
        yield NS
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=30)  # its end of the link with it
        subprocess.run(["ip", "link", "del", f"{LINK}a"], capture_output=True, timeout=30)
        shutil.rmtree(hosts, ignore_errors=True)


def _on_host(ns: str, *cmd: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


# From the GPU host: each URL's status to 10 requests without credentials, 10 with, and 1 under an unlisted name.
_REQUESTS = f"""
PROBE = {PROBE!r}
import json, os, sys, requests
auth = (os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"])
out = {{}}
for url in sys.argv[1:]:
    get = lambda **kw: requests.get(url + PROBE, timeout=30, **kw).status_code
    port = url.rsplit(":", 1)[1]
    out[url] = {{"anonymous": [get() for _ in range(10)], "user": [get(auth=auth) for _ in range(10)],
                "unlisted": get(auth=auth, headers={{"Host": "stranger.example:" + port}})}}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def logged(mlflow_server: Team, gpu_host: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The recipe's printed URIs; a suite of chapter 7's transpose logged from the GPU host through the first."""
    status = mlflow_server.recipe("status")
    uris = re.findall(r"http://[^\s)]+", status.split("each GPU host sets:")[1])
    assert uris[:2] == [f"http://{SERVER_NAME}:{mlflow_server.port}", f"http://{SERVER_ADDRESS}:{mlflow_server.port}"]
    tmp = tmp_path_factory.mktemp("gpu-host")
    env = client_env() | {"MLFLOW_TRACKING_URI": uris[0], "PYTHONPATH": str(REPO), "COLUMNS": "200",
                          "PERFLAB_RESULTS_DIR": str(tmp), "NO_COLOR": "1"}  # fmt: skip
    run = _on_host(gpu_host, sys.executable, "-m", "perflab", "run", "-t", "ch7:transpose", "--device", "cpu",
                   "--experiment", "gpu-host", env=env)  # fmt: skip
    assert run.returncode == 0 and "MLflow parent run" in run.stdout, run.stdout + run.stderr
    return {"uris": uris, "run": run, "parent": run.stdout.split("MLflow parent run")[1].split()[0], "env": env}


def test_a_gpu_host_logs_through_the_printed_name_and_address_and_is_refused_without_credentials(
    mlflow_server: Team, gpu_host: str, logged: dict[str, object]
) -> None:
    uris = logged["uris"]
    assert isinstance(uris, list)
    client = MlflowClient(f"http://127.0.0.1:{mlflow_server.port}")
    parent = client.get_run(str(logged["parent"]))
    assert parent.data.tags["perflab.suite_status"] == "completed"
    done = _on_host(gpu_host, sys.executable, "-c", _REQUESTS, *uris[:2], env=logged["env"])  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    for url, seen in json.loads(done.stdout).items():
        assert seen == {"anonymous": [401] * 10, "user": [200] * 10, "unlisted": 403}, url


def _secrets(team: Team) -> dict[str, str]:
    """Every secret the recipe made: PostgreSQL's passwords, Flask's key, each MLflow user's password."""
    found = {f: (team.dir / f).read_text().strip() for f in ("pg-password", "optuna-password", "flask-secret")}
    for path in (team.dir / "users").glob("*.credentials"):
        found[path.name] = path.read_text().split("mlflow_tracking_password = ")[1].strip()
    assert all(len(v) >= 20 for v in found.values()), found.keys()
    return found


def test_no_secret_in_ps_in_mlflow_or_in_a_log(
    mlflow_server: Team, logged: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    secrets = _secrets(mlflow_server)
    ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True, check=True).stdout
    assert "mlflow server" in ps and "--app-name basic-auth" in ps  # the server runs, with authentication
    client = MlflowClient(f"http://127.0.0.1:{mlflow_server.port}")
    parent = str(logged["parent"])
    texts = {"ps": ps, "the run's output": logged["run"].stdout + logged["run"].stderr}  # type: ignore[attr-defined]
    for run in client.search_runs([client.get_run(parent).info.experiment_id]):  # the parent and its variants
        texts[f"run {run.info.run_name}: params and tags"] = json.dumps([run.data.params, run.data.tags])
        where = tmp_path / run.info.run_id
        where.mkdir()
        for f in Path(client.download_artifacts(run.info.run_id, "", str(where))).rglob("*"):
            if f.is_file():
                texts[f"artifact {f.relative_to(tmp_path)}"] = f.read_text(errors="replace")
    for log in ("mlflow.log", "initdb.log", "run/postgresql.log"):
        texts[log] = (mlflow_server.dir / log).read_text(errors="replace")
    assert sum(k.startswith("artifact") and k.endswith("result.json") for k in texts) == 2  # both variants read
    leaks = [(where, name) for where, text in texts.items() for name, value in secrets.items() if value in text]
    assert not leaks


def _as_stranger(*cmd: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent"}  # no PGPASSFILE, no credentials
    return subprocess.run(["runuser", "-u", "nobody", "--", *cmd], env=env, capture_output=True, text=True, timeout=60)


def test_a_second_local_user_reads_no_database_and_no_file_of_the_store(mlflow_server: Team) -> None:
    if os.geteuid() != 0 or shutil.which("psql") is None:
        pytest.skip("needs root (to act as another user) and PostgreSQL's client, psql")
    pg_user = subprocess.run(["ps", "-o", "user=", "-C", "postgres"], capture_output=True, text=True).stdout.split()
    if "nobody" in pg_user:
        pytest.skip("PostgreSQL runs as nobody here (no postgres user): nobody is not a stranger to it")
    d, port = mlflow_server.dir, str(mlflow_server.pg_port)
    for db, role in (("mlflow", "perflab"), ("optuna", "perflab_optuna"), ("mlflow_auth", "nobody")):
        for host in ("127.0.0.1", str(d / "run")):  # TCP, and the socket
            done = _as_stranger("psql", "-w", "-h", host, "-p", port, "-U", role, "-d", db, "-c", "SELECT 1")
            assert done.returncode != 0, (db, role, host, done.stdout)
            assert re.search(r"password|Permission denied", done.stderr), done.stderr
    for path in ("pg-password", "users/admin.credentials", "pgdata/PG_VERSION", "artifacts", "mlflow.log", "."):
        done = _as_stranger("ls" if (d / path).is_dir() else "cat", str(d / path))
        assert done.returncode != 0 and "Permission denied" in done.stderr, (path, done.stdout)
    optuna = {**os.environ, "PGPASSWORD": (d / "optuna-password").read_text().strip()}
    for db in ("mlflow", "mlflow_auth"):  # the sweep workers' role, with its password, reaches only its own
        done = subprocess.run(["psql", "-w", "-h", "127.0.0.1", "-p", port, "-U", "perflab_optuna", "-d", db, "-c",
                               "SELECT 1"], env=optuna, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode != 0 and "permission denied for database" in done.stderr, done.stderr
    hba = subprocess.run(["cat", str(d / "pgdata" / "pg_hba.conf")], capture_output=True, text=True).stdout
    rules = [line.split() for line in hba.splitlines() if line.strip() and not line.startswith("#")]
    assert rules and all(rule[-1] == "scram-sha-256" for rule in rules), rules


def test_a_gpu_host_without_credentials_is_refused_and_keeps_its_results(
    mlflow_server: Team, gpu_host: str, logged: dict[str, object], tmp_path: Path
) -> None:
    env = {k: v for k, v in logged["env"].items() if k not in CREDENTIALS}  # type: ignore[attr-defined]
    env |= {"PERFLAB_RESULTS_DIR": str(tmp_path), "HOME": str(tmp_path)}  # no ~/.mlflow/credentials either
    run = _on_host(gpu_host, sys.executable, "-m", "perflab", "run", "-t", "ch7:transpose", "--device", "cpu",
                   "--experiment", "gpu-host-anonymous", env=env)  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "401" in run.stderr and "~/.mlflow/credentials" in run.stderr and "perflab import" in run.stderr, run.stderr
    assert any((tmp_path / "spool").rglob("*.json"))  # kept for `perflab import` with a user's credentials
    client = MlflowClient(f"http://127.0.0.1:{mlflow_server.port}")
    assert client.get_experiment_by_name("gpu-host-anonymous") is None
