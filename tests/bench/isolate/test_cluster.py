"""A suite on a Ray cluster (bench.isolate.cluster): the dispatcher's accounting without Ray, then a real local
cluster of two worker nodes (GPUs simulated on the CPU, ``ray_cluster`` in tests/services.py) running examples
into the MLflow server (``mlflow_server``), with a node killed in the middle."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from bench.define.discovery import discover, select
from bench.errors import PerflabError
from bench.isolate.cluster import Dispatcher, _check_reachable, _connect, _Driver, import_ray
from tests.services import REPO, Team, client_env


def test_the_dispatcher_hands_out_each_example_once_and_puts_a_lost_nodes_back() -> None:
    d = Dispatcher([(0, "ch07:a"), (1, "ch07:b"), (2, "ch07:c")], max_attempts=2)
    assert d.take("n1") == (0, "ch07:a") and d.take("n2") == (1, "ch07:b")
    assert d.finish("n1", 0, {"index": 0}) and d.state() == (1, 1)
    assert d.take("n1") == (2, "ch07:c")
    assert d.lost("n2", "Ray node n2 lost") == [1]  # back, at the front
    assert d.state() == (1, 1) and d.take("n1") == (1, "ch07:b")
    assert not d.finish("n2", 1, {"index": 1}) or d.finish("n1", 1, {"index": 1}) is False  # once only
    assert d.finish("n1", 2, {"index": 2})
    finished, failed = d.collect()
    assert sorted(p["index"] for p in finished) == [0, 1, 2] and failed == [] and d.state() == (0, 0)


def test_an_example_lost_twice_or_left_without_a_node_is_failed_with_the_reason() -> None:
    d = Dispatcher([(0, "ch07:a"), (1, "ch07:b"), (2, "ch07:c")], max_attempts=2)
    d.take("n1"), d.lost("n1", "Ray node n1 lost: killed")
    assert d.take("n2") == (0, "ch07:a") and d.lost("n2", "Ray node n2 lost: killed") == []
    d.give_up("no Ray node was left to run it")
    _, failed = d.collect()
    assert failed[0] == (0, "Ray node n2 lost: killed; tried on 2 node(s): not tried again")
    assert sorted(failed[1:]) == [(1, "no Ray node was left to run it"), (2, "no Ray node was left to run it")]


def test_the_driver_records_a_failed_example_as_failed_variants_and_pairs(chapters: Callable[..., Path]) -> None:
    examples = select(discover(chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {},
                                         "ch07/optimized_a_fast.py": {}})))  # fmt: skip
    logged: list[Any] = []

    class ListSink:
        def log_variant(self, result: Any, comparison: Any = None) -> str:
            logged.append((result, comparison))
            return ""

    driver = _Driver(examples, ListSink(), None, None, None)
    driver._take([], [(0, "Ray node n1 lost: killed; tried on 2 node(s): not tried again")])
    assert [r.spec.key for r, _ in logged] == ["ch07:a:baseline", "ch07:a:optimized", "ch07:a:optimized_fast"]
    assert all(r.status == "failed" and r.error.message.startswith("Ray node n1 lost") for r, _ in logged)
    assert logged[0][1] is None and all(c.status == "failed" for _, c in logged[1:])
    assert sorted(driver.done.by_example) == [0]


def test_a_variants_files_travel_back_from_its_node(chapters: Callable[..., Path], tmp_path: Path) -> None:
    """The files a variant handed to the harness on a node (``context().file``) come back in its example's payload
    and are where the driver's result says."""
    from bench.define.result import VariantResult
    from bench.isolate.cluster import _payload

    examples = select(discover(chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {}})))
    on_node = tmp_path / "node" / "files"
    on_node.mkdir(parents=True)
    (on_node / "snapshot.pickle").write_bytes(b"\x80\x04snapshot")
    result = VariantResult(spec=examples[0].variants[0], status="ok", files=str(on_node))
    payload = _payload(0, [(result, None)])
    logged: list[Any] = []

    class ListSink:
        def log_variant(self, result: Any, comparison: Any = None) -> str:
            logged.append(result)
            return ""

    driver = _Driver(examples, ListSink(), None, None, None)
    driver.profiles = tmp_path / "driver"
    driver._take([payload], [])
    back = Path(logged[0].files)
    assert back != on_node and (back / "snapshot.pickle").read_bytes() == b"\x80\x04snapshot"


def test_without_ray_the_flag_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    with pytest.raises(PerflabError, match=r"not installed here: pip install -e '\.\[ray\]'"):
        import_ray()


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening, then closed: a connection there is refused
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("address", ["nocolon", "host:", "host:port", "host:70000", ":6379"])
def test_a_malformed_ray_address_is_one_line_naming_it_and_what_is_accepted(address: str) -> None:
    expected = rf"^--ray '{re.escape(address)}': not a Ray address; accepted: auto .*HOST:PORT"
    with pytest.raises(PerflabError, match=expected):
        _check_reachable(address)


def test_an_address_where_nothing_listens_fails_at_once_where_ray_would_retry_for_minutes() -> None:
    t0 = time.monotonic()
    with pytest.raises(PerflabError, match=r"no Ray cluster answers there \(Connection refused\)"):
        _check_reachable(f"127.0.0.1:{_closed_port()}")
    assert time.monotonic() - t0 < 5
    with socket.socket() as listener:  # something answering passes, IPv4 or a bracketed host alike
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        _check_reachable(f"127.0.0.1:{listener.getsockname()[1]}")
        _check_reachable(f"[127.0.0.1]:{listener.getsockname()[1]}")
    _check_reachable("auto")  # Ray answers these itself, at once
    _check_reachable("ray://head:10001")


def test_a_wrong_ray_address_stops_the_command_before_anything_is_logged(tmp_path: Path) -> None:
    # found, not imported: the command imports Ray in its own process; imported here, Ray would put its vendored
    # packages first on this process's import path, on which the process's servers are keyed (its next variant
    # started a new one: bench.isolate.rendezvous)
    if importlib.util.find_spec("ray") is None:
        pytest.skip("could not import 'ray'")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")} | {"COLUMNS": "80", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "-t", "ch7:transpose", "--ray",
                           f"127.0.0.1:{_closed_port()}", "--tracking-uri", uri], cwd=REPO, env=env, text=True,
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "no Ray cluster answers there" in done.stderr
    assert not (tmp_path / "mlflow.db").exists() or not MlflowClient(uri).search_runs(["0"])


@pytest.mark.slow  # a Ray cluster of its own: a service
def test_a_cluster_without_gpus_is_refused_before_anything_is_logged(tmp_path: Path) -> None:
    """``ray start`` on a host without GPUs (or without ``--num-gpus``) declares none: refused with the flag that
    declares them, before the suite's parent run exists (no FAILED run left in the store)."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False})
    try:
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        env = client_env() | {"COLUMNS": "200", "NO_COLOR": "1", "PERFLAB_RESULTS_DIR": str(tmp_path / "results")}
        done = subprocess.run([sys.executable, "-m", "perflab", "run", "-t", "ch7:transpose", "--ray", cluster.address,
                               "--tracking-uri", uri], cwd=REPO, env=env, text=True, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    finally:
        cluster.shutdown()
    assert done.returncode == 2 and "have no GPU (ray start --num-gpus N)" in done.stderr, done.stderr
    client = MlflowClient(uri)
    assert not (tmp_path / "mlflow.db").exists() or not client.search_runs([e.experiment_id for e in
                                                                             client.search_experiments()])  # fmt: skip
    assert not (tmp_path / "results" / "spool").exists() or not any((tmp_path / "results" / "spool").iterdir())


# ---------------------------------------------------------------------------------------- a real cluster

# Tags a measurement adds when it sees something (docs/mlflow.md): the two nodes of this cluster are one 2-core
# host, so their CPU measurements run side by side and may note drift where the local run did not; and which GPU
# the worker was pinned to (Ray always pins one, a local run on one device does not).
SEEN = {"perflab.drift", "perflab.timing_notes", "perflab.machine_flags", "perflab.cuda_visible_devices"}
# Metrics of a child started ahead (bench.isolate.workers): a worker's first child is not, whichever example it is.
AHEAD = {"ahead_s", "gate_late_s"}
# Three examples whose variants each sleep in set-up (no CPU): long enough to kill a node while it holds one.
SLOW = {f"ch07/{kind}_{name}.py": {"SETUP_SLEEP": 2.0} for name in "abc" for kind in ("baseline", "optimized")}


def _run(*args: str | Path, env: dict[str, str], timeout: float = 300) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "perflab", "run", *map(str, args)], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip


def _env(server: Team, results: Path) -> dict[str, str]:
    env = client_env()  # the server's credentials kept
    env.update({"MLFLOW_TRACKING_URI": server.uri, "PERFLAB_RESULTS_DIR": str(results), "COLUMNS": "200",
                "NO_COLOR": "1", "PYTHONPATH": str(REPO)})  # fmt: skip
    return env


def _suite(client: MlflowClient, experiment: str) -> tuple[Any, list[Any]]:
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "perflab.variant" not in r.data.tags]
    assert len(parents) == 1, [r.info.run_name for r in parents]
    return parents[0], [r for r in runs if "perflab.variant" in r.data.tags]


def _manifest(client: MlflowClient, run_id: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return dict(json.loads(Path(client.download_artifacts(run_id, "manifest.json", tmp)).read_text()))


def test_a_chapter_on_two_nodes_logs_like_a_local_run(
    ray_cluster: tuple[Any, list[Any]], mlflow_server: Team, tmp_path: Path
) -> None:
    """Chapter 7's examples at smoke size, placed on the two nodes' (simulated) GPUs, into the MLflow server: one
    parent, every variant once, a pair on one node, and the same tags, metrics and artifacts as a local run."""
    cluster, _ = ray_cluster
    targets = ["-t", "ch7:transpose", "-t", "ch7:aos_soa", "-t", "ch7:coalescing", "-t", "ch7:vectorized_copy"]
    env = _env(mlflow_server, tmp_path / "results")
    ray = _run(*targets, "--device", "cpu", "--ray", cluster.address, "--experiment", "ray-ch07", env=env)
    out, err = ray.communicate(timeout=300)
    assert ray.returncode == 0, out + err
    joined = r"^  Ray: joined the cluster in [0-9.]+ s before the suite, left it in [0-9.]+ s after$"
    assert re.search(joined, out, re.M), out
    local = _run(*targets, "--device", "cpu", "--experiment", "local-ch07", env=env)
    out, err = local.communicate(timeout=300)
    assert local.returncode == 0, out + err
    client = MlflowClient(mlflow_server.uri)
    parent, runs = _suite(client, "ray-ch07")
    local_parent, local_runs = _suite(client, "local-ch07")
    assert sorted(r.info.run_name for r in runs) == sorted(r.info.run_name for r in local_runs)
    assert len(runs) == 8 and all(r.data.tags["perflab.status"] == "ok" for r in runs)
    assert parent.info.status == "FINISHED" and parent.data.metrics["n_verified"] == 4
    nodes = {r.info.run_name: _manifest(client, r.info.run_id)["host"]["ray_node"] for r in runs}
    for target in {n.rsplit(":", 1)[0] for n in nodes}:  # a pair on one node
        assert nodes[f"{target}:baseline"] == nodes[f"{target}:optimized"], nodes
    assert len(set(nodes.values())) == 2, nodes  # both nodes took examples
    by_name = {r.info.run_name: r for r in local_runs}
    for run in runs:  # identical in form: the same keys (values are measurements)
        other = by_name[run.info.run_name]
        assert set(run.data.tags) ^ set(other.data.tags) <= SEEN, set(run.data.tags) ^ set(other.data.tags)
        assert set(run.data.metrics) ^ set(other.data.metrics) <= AHEAD, set(run.data.metrics) ^ set(other.data.metrics)
        assert set(run.data.params) == set(other.data.params)
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"result.json", "manifest.json"}
    assert set(parent.data.tags) - {"mlflow.runName"} == set(local_parent.data.tags) - {"mlflow.runName"}


def test_a_node_killed_mid_suite_has_its_example_run_on_the_other(
    ray_cluster: tuple[Any, list[Any]], mlflow_server: Team, chapters: Callable[..., Path], tmp_path: Path
) -> None:
    cluster, nodes = ray_cluster
    root = chapters(SLOW)
    results = tmp_path / "results"
    proc = _run("--chapters-dir", root, "--device", "cpu", "--iterations", "3", "--warmup", "1", "--ray",
                cluster.address, "--experiment", "ray-lost", env=_env(mlflow_server, results))  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(results.glob("spool/*/0001-*/entry.json")):  # the first variant is back: both nodes hold one
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    victim = nodes[0]
    cluster.remove_node(victim, allow_graceful=False)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, out + err
    assert "lost" in err and "put back" in err, err  # said once, on the console
    client = MlflowClient(mlflow_server.uri)
    parent, runs = _suite(client, "ray-lost")
    assert Counter(r.info.run_name for r in runs) == Counter(f"ch07:{n}:{k}" for n in "abc"
                                                             for k in ("baseline", "optimized"))  # fmt: skip
    assert all(r.data.tags["perflab.status"] == "ok" for r in runs) and parent.data.metrics["n_verified"] == 3
    ran_on = {r.info.run_name: _manifest(client, r.info.run_id)["host"]["ray_node"] for r in runs}
    survivor = next(n for n in set(ran_on.values()) if n != victim.node_id)
    assert sum(n == survivor for n in ran_on.values()) >= 4  # its own example(s) and the one the lost node held


def test_joining_a_cluster_keeps_the_commands_sigterm_handler() -> None:
    """``ray.init`` replaces the driver's SIGTERM handler with ``sys.exit``: SIGTERM (``timeout``, Slurm) would then
    end ``perflab run --ray`` as an error, and a test session under ``timeout`` would take it as one test's failure
    and run on. The handler before is put back, whether the cluster was joined or not."""
    import signal
    from types import SimpleNamespace

    def init_like_ray(fails: bool) -> Callable[..., None]:
        def init(**_: Any) -> None:
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
            if fails:
                raise ConnectionError("no cluster")

        return init

    mine = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # perflab's main: SIGTERM stops as Ctrl-C does
        _connect(SimpleNamespace(init=init_like_ray(False)), "auto")
        assert signal.getsignal(signal.SIGTERM) is signal.default_int_handler
        with pytest.raises(PerflabError, match="no Ray cluster to join"):
            _connect(SimpleNamespace(init=init_like_ray(True)), "auto")
        assert signal.getsignal(signal.SIGTERM) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, mine)
