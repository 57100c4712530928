"""A suite fanned out over a Ray cluster (``perflab run --ray auto|ADDRESS``): the examples on the cluster's GPUs.

Placement is Ray's: one actor per GPU host (``NodeAgent``), holding every GPU Ray lists on that host and pinned to it
(``NodeAffinitySchedulingStrategy``). On its host the agent runs the local scheduler unchanged
(``bench.isolate.suite.run_lanes``): a worker per GPU Ray gave it (``CUDA_VISIBLE_DEVICES``), each example on one
worker from start to end (a pair stays on one GPU), children started ahead and gated, host-clocked measurements alone
on their host: every rule of ``bench.isolate.workers`` holds, as they hold within one process (tasks of their own per
example could not park each other's children). The workers take examples from a ``Dispatcher`` actor on the driver's
host, one at a time (the longest first, as locally), so a faster host takes more; each example's results go back to
the driver when the example is over, and the driver logs them through the suite's sink (the spool, then the shared
MLflow server): one parent run, variant runs identical in form to a local run's, each ``manifest.json`` holding the
host manifest of the node that ran it.

A node that is lost (its agent or host died) has the examples it held put back in the queue for another node, once
(``max_attempts``); an example that cannot be run again, or that no node is left to run, is recorded ``failed`` with
the reason. A result never comes twice: an example already finished is not accepted again. The examples still come
back one whole example at a time, so a pair is never split between nodes.
"""

# long: the driver, its node agents and the dispatcher are one protocol; apart, each half reads only with the other
from __future__ import annotations

import io
import logging
import os
import queue
import signal
import socket
import tarfile
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.define.config import Layer
from bench.define.discovery import Example, discover
from bench.define.result import Comparison, ErrorInfo, SuiteResult, VariantResult
from bench.errors import PerflabError
from bench.isolate.sink import OnResult, Sink
from bench.isolate.suite import _suite_result, expected_order, run_lanes
from bench.isolate.workers import Done
from bench.measure.compare import compare

__all__ = ["Dispatcher", "NodeAgent", "check_ray", "import_ray", "run_on_ray"]

RAY_HINT = "pip install -e '.[ray]' (or pip install 'ray[default]')"
_POLL_S = 0.5  # how often the driver collects finished examples and looks for lost nodes
Payload = dict[str, Any]  # an example's results as they travel back: JSON texts and profile archives


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PerflabError(f"--ray needs Ray, which is not installed here: {RAY_HINT}") from None
    return ray


class Dispatcher:
    """The suite's queue of examples, on the driver's host (a Ray actor; a plain object in tests): who holds
    what, what finished, what a lost node held."""

    def __init__(self, items: Sequence[tuple[int, str]], max_attempts: int = 2) -> None:
        self.queue: deque[tuple[int, str]] = deque(items)
        self.max_attempts = max_attempts
        self.tried: dict[int, list[str]] = {i: [] for i, _ in items}  # the nodes each example was given to
        self.held: dict[int, tuple[str, str]] = {}  # index → (node, target)
        self.done: set[int] = set()
        self._finished: list[Payload] = []
        self._failed: list[tuple[int, str]] = []

    def take(self, node: str) -> tuple[int, str] | None:
        if not self.queue:
            return None
        index, target = self.queue.popleft()
        self.tried[index].append(node)
        self.held[index] = (node, target)
        return index, target

    def finish(self, node: str, index: int, payload: Payload) -> bool:
        """An example's results; False (dropped) when it was finished already (a node given up for lost that
        still ended it): nothing is logged twice."""
        if self.held.get(index, (node, ""))[0] == node:
            self.held.pop(index, None)
        if index in self.done:
            return False
        self.done.add(index)
        self.queue = deque(item for item in self.queue if item[0] != index)
        self._finished.append(payload)
        return True

    def lost(self, node: str, reason: str) -> list[int]:
        """A node is gone: what it held goes back in the queue, or is failed once it was tried ``max_attempts``
        times. Returns the indices put back."""
        back = []
        for index, (holder, target) in sorted(self.held.items()):
            if holder != node:
                continue
            del self.held[index]
            if len(self.tried[index]) < self.max_attempts:
                self.queue.appendleft((index, target))
                back.append(index)
            else:
                self._fail(index, f"{reason}; tried on {len(self.tried[index])} node(s): not tried again")
        return back

    def give_up(self, reason: str) -> None:
        """No node is left: whatever is queued or held is failed."""
        for index, _ in list(self.queue):
            self._fail(index, reason)
        for index in list(self.held):
            self._fail(index, reason)
        self.queue.clear()
        self.held.clear()

    def _fail(self, index: int, reason: str) -> None:
        if index not in self.done:
            self.done.add(index)
            self._failed.append((index, reason))

    def collect(self) -> tuple[list[Payload], list[tuple[int, str]]]:
        """What finished and what failed since the last call."""
        out = (self._finished, self._failed)
        self._finished, self._failed = [], []
        return out

    def state(self) -> tuple[int, int]:
        """(examples queued, examples held by nodes)."""
        return len(self.queue), len(self.held)


class _NodePending:
    """A node's workers' queue: examples taken from the dispatcher one at a time (``bench.isolate.workers.Pending``)."""

    def __init__(self, ray: Any, dispatcher: Any, node: str, examples: dict[str, Example], sink: _NodeSink) -> None:
        self.ray, self.dispatcher, self.node, self.examples, self.sink = ray, dispatcher, node, examples, sink

    def get_nowait(self) -> tuple[int, Example]:
        while (item := self.ray.get(self.dispatcher.take.remote(self.node))) is not None:
            index, target = item
            example = self.examples.get(target)
            if example is not None:
                self.sink.expect(index, example)
                return index, example
            self.sink.missing(index, target)
        raise queue.Empty


class _NodeSink:
    """Gathers an example's results on its node and sends them to the dispatcher once the example is over."""

    def __init__(self, ray: Any, dispatcher: Any, node: str, host: dict[str, Any]) -> None:
        self.ray, self.dispatcher, self.node, self.host = ray, dispatcher, node, host
        self._open: dict[str, tuple[int, Example, list[tuple[VariantResult, Comparison | None]]]] = {}

    def expect(self, index: int, example: Example) -> None:
        self._open[example.target] = (index, example, [])

    def missing(self, index: int, target: str) -> None:
        reason = f"{target} is not in the checkout of Ray node {self.host.get('hostname')} ({self.node[:12]})"
        self.dispatcher.finish.remote(self.node, index, {"index": index, "error": reason})

    def log_variant(self, result: VariantResult, comparison: Comparison | None = None) -> str:
        index, example, got = self._open[result.spec.target]
        result.host = self.host
        got.append((result, comparison))
        if len(got) == len(example.variants):
            del self._open[result.spec.target]
            self.ray.get(self.dispatcher.finish.remote(self.node, index, _payload(index, got)))
        return ""


def _tar(d: str | None) -> bytes | None:
    """The directory ``d`` as a gzipped tar archive (None: no such directory)."""
    if d is None or not Path(d).is_dir():
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(d, arcname=".")
    return buf.getvalue()


def _payload(index: int, got: list[tuple[VariantResult, Comparison | None]]) -> Payload:
    """JSON texts (the driver's pydantic need not match the node's byte for byte), each profile's files and the
    files each variant handed to the harness."""
    profiles, files = {}, {}
    for result, _ in got:
        if (archive := _tar(result.profile.dir if result.profile else None)) is not None:
            profiles[result.spec.key] = archive
        if (archive := _tar(result.files)) is not None:
            files[result.spec.key] = archive
    comparisons = [c.model_dump_json() if c is not None else None for _, c in got]
    return {"index": index, "results": [r.model_dump_json() for r, _ in got], "comparisons": comparisons,
            "profiles": profiles, "files": files}  # fmt: skip


class NodeAgent:
    """Runs one host's share of a suite (a Ray actor holding the host's GPUs): its workers take examples until
    none is queued and none is held elsewhere (a lost node's may come back); returns the host's time line."""

    def run(self, dispatcher: Any, job: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
        ray = import_ray()
        node = ray.get_runtime_context().get_node_id()
        host = {**job["describe_host"](), "ray_node": node}
        examples = discover(job["chapters_dir"]).examples
        gpus = [str(g) for g in ray.get_gpu_ids()] or ["0"]
        names = [f"{host.get('hostname')}:{node[:8]}:gpu{g}" for g in gpus]
        sink = _NodeSink(ray, dispatcher, node, host)
        pending = _NodePending(ray, dispatcher, node, examples, sink)
        timeline: list[dict[str, Any]] = []
        started, t0 = time.time(), time.monotonic()
        while True:
            run_lanes(pending, Done(), timeline.append, [{"CUDA_VISIBLE_DEVICES": g} for g in gpus],
                      job["suite_layer"], job["cli_layer"], sink=sink, cold_start=job["cold_start"],
                      overlap=job["overlap"], t0=t0, names=names)  # fmt: skip
            queued, held = ray.get(dispatcher.state.remote())
            if not queued and not held:
                return started, timeline
            if not queued:
                time.sleep(1.0)  # another node holds examples: if it is lost, they come back


def run_on_ray(
    examples: Sequence[Example], address: str, suite_layer: Layer = None, cli_layer: Layer = None, *,
    sink: Sink | None = None, on_result: OnResult | None = None, cold_start: bool = False, overlap: bool = True,
    chapters_dir: str | Path | None = None, describe_host: Callable[[], dict[str, Any]] | None = None,
    warn: Callable[[str], None] | None = None, max_attempts: int = 2, expected_s: Mapping[str, float] | None = None,
    on_timeline: Callable[[dict[str, Any]], None] | None = None,
) -> SuiteResult:  # fmt: skip
    """Run ``examples`` on the Ray cluster at ``address`` ("auto": ``$RAY_ADDRESS`` or the cluster ``ray start``
    made on this host) and return the suite as ``run_suite`` would. ``describe_host``: a node's host manifest
    (``bench.record.manifest.host_manifest``), called on the node; ``warn``: one line per node whose commit
    differs from this host's. ``expected_s``: the last run's seconds per variant: the longest examples go first.
    ``on_timeline``: each time-line entry as the driver gets it (a node's, when its node ends), as ``run_suite``'s."""
    ray = import_ray()
    joined = time.monotonic() - _JOINED_S.pop(address, 0.0)
    if not ray.is_initialized():  # check_ray joined it already
        _connect(ray, address)
    t0, wall0 = time.monotonic(), time.time()
    suite: SuiteResult | None = None
    try:
        gpu_nodes = _gpu_nodes(ray, address)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as Affinity

        here = ray.get_runtime_context().get_node_id()
        dispatcher = ray.remote(Dispatcher).options(num_cpus=0, scheduling_strategy=Affinity(here, soft=False)).remote(
            [(i, examples[i].target) for i in expected_order(examples, expected_s)], max_attempts
        )  # fmt: skip
        job = {"suite_layer": suite_layer, "cli_layer": cli_layer, "cold_start": cold_start, "overlap": overlap,
               "chapters_dir": str(chapters_dir) if chapters_dir else None,
               "describe_host": describe_host or dict}  # fmt: skip
        agent = ray.remote(NodeAgent)
        runs = {
            agent.options(num_gpus=gpus, num_cpus=0, max_restarts=0, scheduling_strategy=Affinity(node, soft=False))
            .remote().run.remote(dispatcher, job): node
            for node, gpus in gpu_nodes.items()
        }  # fmt: skip
        driver = _Driver(examples, sink, on_result, warn, describe_host, on_timeline)
        with tempfile.TemporaryDirectory(prefix="perflab-ray-") as tmp:
            driver.profiles = Path(tmp)
            driver.wait(ray, dispatcher, runs, wall0)
            suite = _suite_result(examples, driver.done, driver.timeline, time.monotonic() - t0)
    finally:
        left = time.monotonic()
        ray.shutdown()
        if suite is not None:
            suite.cluster_s = {"connect_s": t0 - joined, "shutdown_s": time.monotonic() - left}
    assert suite is not None
    return suite


def check_ray(address: str) -> None:
    """Before a suite starts (``perflab run --ray``, ahead of ``run_on_ray``): Ray installed, something answering
    at ``address``, a GPU on the cluster (a PerflabError otherwise, before the suite's parent run exists: a refusal
    leaves nothing in the store). Joins the cluster; ``run_on_ray`` keeps the connection."""
    ray = import_ray()
    _check_reachable(address if address != "auto" else os.environ.get("RAY_ADDRESS", "auto"))
    t0 = time.monotonic()
    _connect(ray, address)
    try:
        _gpu_nodes(ray, address)
    except PerflabError:
        ray.shutdown()
        raise
    _JOINED_S[address] = time.monotonic() - t0


_JOINED_S: dict[str, float] = {}  # address -> seconds check_ray took to join it (the suite's connect time)


def _connect(ray: Any, address: str) -> None:
    """Join the cluster. ``ray.init`` replaces this process's SIGTERM handler with one that exits at once: the one
    before (``perflab``'s, which stops a suite as Ctrl-C does and logs what finished) is put back."""
    on_term = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise PerflabError(
            f"--ray {address}: no Ray cluster to join ({str(exc).splitlines()[0]}); start one with `ray start "
            "--head` on a host and `ray start --address HEAD:6379` on the others, or pass its address"
        ) from None
    finally:
        if on_term is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_term)


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A PerflabError in one line unless something answers at ``address``'s HOST:PORT within ``timeout_s``: Ray
    itself retries an address where nothing listens for minutes, printing a warning every few seconds. "auto" and
    Ray Client addresses (``ray://``) are left to Ray, which answers those at once."""
    if address == "auto" or address.startswith("ray://"):
        return
    accepted = "auto (this host's cluster, or $RAY_ADDRESS) or the head's HOST:PORT (`ray start --head` prints it)"
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PerflabError(f"--ray {address!r}: not a Ray address; accepted: {accepted}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise PerflabError(
            f"--ray {address!r}: no Ray cluster answers there ({exc.strerror or type(exc).__name__}); accepted: "
            f"{accepted}"
        ) from None


def _gpu_nodes(ray: Any, address: str) -> dict[str, int]:
    """Node id → GPUs, for every live node with a GPU."""
    nodes = {n["NodeID"]: int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n.get("Alive")}
    gpus = {node: count for node, count in nodes.items() if count >= 1}
    if not gpus:
        raise PerflabError(f"--ray {address}: the cluster's {len(nodes)} node(s) have no GPU (ray start --num-gpus N)")
    return gpus


class _Driver:
    """The driver's side: results from the dispatcher into the suite's sink, lost nodes' examples handed back."""

    def __init__(
        self, examples: Sequence[Example], sink: Sink | None, on_result: OnResult | None,
        warn: Callable[[str], None] | None, describe_host: Callable[[], dict[str, Any]] | None,
        on_timeline: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:  # fmt: skip
        self.examples, self.sink, self.on_result, self.warn = examples, sink, on_result, warn
        self.on_timeline = on_timeline
        self.done = Done()
        self.timeline: list[dict[str, Any]] = []
        self.profiles = Path(tempfile.gettempdir())
        self.commit = ((describe_host() if describe_host else {}).get("git") or {}).get("commit")
        self.warned: set[str] = set()

    def wait(self, ray: Any, dispatcher: Any, runs: dict[Any, str], wall0: float) -> None:
        while True:
            self._take(*ray.get(dispatcher.collect.remote()))
            if not runs:
                break
            ready, _ = ray.wait(list(runs), num_returns=len(runs), timeout=_POLL_S)
            for ref in ready:
                node = runs.pop(ref)
                try:
                    started, entries = ray.get(ref)
                    shift = started - wall0  # the node's clock to the driver's
                    for e in entries:
                        self._timed({**e, "start_s": e["start_s"] + shift, "end_s": e["end_s"] + shift})
                except ray.exceptions.RayError as exc:  # the node, its agent or the harness on it failed
                    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()] or [type(exc).__name__]
                    why = lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1]}"  # a task's error: its last
                    reason = f"Ray node {node[:12]} lost: {why[:300]}"
                    back = ray.get(dispatcher.lost.remote(node, reason))
                    if self.warn is not None:
                        names = ", ".join(self.examples[i].target for i in back) or "none"
                        self.warn(f"{reason}; the examples it held put back in the queue for another node: {names}")
            if not runs:
                ray.get(dispatcher.give_up.remote("no Ray node was left to run it"))

    def _timed(self, entry: dict[str, Any]) -> None:
        self.timeline.append(entry)
        if self.on_timeline is not None:
            self.on_timeline(entry)

    def _take(self, finished: list[Payload], failed: list[tuple[int, str]]) -> None:
        for payload in finished:
            if "error" in payload:
                failed = [*failed, (payload["index"], payload["error"])]
                continue
            for text, ctext in zip(payload["results"], payload["comparisons"], strict=True):
                result = VariantResult.model_validate_json(text)
                comparison = Comparison.model_validate_json(ctext) if ctext else None
                key = result.spec.key
                self._unpack(result, payload["profiles"].get(key), payload.get("files", {}).get(key))
                self._check_commit(result)
                self._accept(payload["index"], result, comparison)
        for index, reason in failed:
            baseline: VariantResult | None = None
            for spec in self.examples[index].variants:
                result = VariantResult(spec=spec, status="failed", failed_stage="startup",
                                       error=ErrorInfo(kind="crash", message=reason))  # fmt: skip
                comparison = compare(baseline, result) if baseline is not None else None
                baseline = result if spec.is_baseline else baseline
                self._accept(index, result, comparison)

    def _accept(self, index: int, result: VariantResult, comparison: Comparison | None) -> None:
        self.done.add(index, result, comparison)
        if self.sink is not None:
            self.sink.log_variant(result, comparison)
        if self.on_result is not None:
            self.on_result(result, comparison)

    def _unpack(self, result: VariantResult, profile: bytes | None, files: bytes | None) -> None:
        """The archives of a result's profile and handed files, extracted here; the result names where."""
        base = self.profiles / result.spec.key.replace(":", "-")
        if profile is not None and result.profile is not None:
            result.profile.dir = _untar(profile, base)
        if files is not None:
            result.files = _untar(files, base.with_name(base.name + "-files"))

    def _check_commit(self, result: VariantResult) -> None:
        host = result.host or {}
        commit = (host.get("git") or {}).get("commit")
        node = str(host.get("ray_node", ""))
        if self.warn and commit and self.commit and commit != self.commit and node not in self.warned:
            self.warned.add(node)
            self.warn(f"Ray node {host.get('hostname')} ({node[:12]}) runs commit {commit[:12]}, this host "
                      f"{self.commit[:12]}: its numbers come from other code")  # fmt: skip


def _untar(archive: bytes, d: Path) -> str:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(d, filter="data")
    return str(d)
