"""bench/isolate/workers.py, rule 3: a host-bound measurement (timed on the host's clock) runs alone on the host.

On the H200 x 2 chapter 1's training_step baseline read 64 ms on two GPUs and 20.5 ms on one:
the other worker's children (CUDA starts, copies, exits) slowed its host-side work. What must hold: while
such a variant warms up and measures, no other worker's child sets up, measures, checks or tears down
(children held at their gates may wait, their CUDA context made), yet other variants still run side by
side; all results stay right.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.define.discovery import discover, select
from bench.isolate.suite import run_suite

BENCH = """
import json, os, time
EVENTS = {events!r}
NAME = {name!r}
CONFIG = {config!r}
CALL_S = {call_s!r}
TEARDOWN_S = {teardown_s!r}

def _log(what, t=None):
    with open(EVENTS, "a") as f:
        f.write(json.dumps({{"what": what, "t": t or time.time(), "name": NAME}}) + "\\n")

class B:
    def get_config(self):
        return CONFIG
    def setup(self):
        import torch
        _log("setup")
        self.calls = []
        self.x = torch.arange(8.0) + 1
        self.out = torch.empty(8)
        _log("setup_end")
    def benchmark_fn(self):
        self.calls.append(time.time())
        time.sleep(CALL_S)
        self.out.copy_(self.x)
    def get_output(self):
        return self.out
    def teardown(self):
        if self.calls:
            _log("first_call", self.calls[0])
            _log("last_call", self.calls[-1] + CALL_S)
        time.sleep(TEARDOWN_S)
        _log("teardown_end")

def get_benchmark():
    return B()
"""

FAST = {"warmup": 1, "iterations": 3, "min_warmup_seconds": 0.0, "device": "cpu", "min_measure_seconds": 0.0,
        "min_rounds": 1, "max_rounds": 1}  # fmt: skip


def _write(root: Path, name: str, events: Path, host_bound: bool) -> None:
    for variant in ("baseline", "optimized"):
        path = root / "ch07" / f"{variant}_{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            BENCH.format(
                events=str(events),
                name=f"{name}:{variant}",
                config={"timing_mode": "cpu", "iterations": 8} if host_bound else None,
                call_s=0.05 if host_bound else 0.001,
                teardown_s=0.0 if host_bound else 0.3,
            )  # fmt: skip
        )


Span = tuple[float, float]


def _intervals(events: Path) -> tuple[dict[str, list[Span]], dict[str, Span]]:
    """(each child's active parts: its set-up, and its first call .. end of teardown (between them it may
    wait to measure); each child's calls: first .. last)."""
    rows = [json.loads(line) for line in events.read_text().splitlines()]
    at = {(r["name"], r["what"]): r["t"] for r in rows}
    names = {r["name"] for r in rows}
    active = {
        n: [(at[(n, "setup")], at[(n, "setup_end")]), (at[(n, "first_call")], at[(n, "teardown_end")])] for n in names
    }
    calls = {n: (at[(n, "first_call")], at[(n, "last_call")]) for n in names}
    return active, calls


def _overlap(a: Span, spans: list[Span]) -> bool:
    return any(a[0] < b[1] and b[0] < a[1] for b in spans)


def test_a_host_bound_measurement_runs_alone_and_the_rest_side_by_side(tmp_path: Path) -> None:
    """Two workers. On a GPU host, variants on the device's clock measure side by side while a host-clocked
    one measures alone; on a CPU-only host every variant is host-clocked, so every measurement runs alone."""
    import torch

    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    for name in "abc":
        _write(root, name, log, host_bound=False)
    _write(root, "x", log, host_bound=True)
    suite = run_suite(select(discover(root)), cli_layer=FAST, workers=[{}, {}])
    assert all(v.status == "ok" for v in suite.variants), [v.error for v in suite.variants]
    assert all(c.verification.verified for c in suite.comparisons)
    active, calls = _intervals(log)
    alone = list(active) if not torch.cuda.is_available() else ["x:baseline", "x:optimized"]
    for x in alone:
        others = [n for n in active if n != x]
        hit = [n for n in others if _overlap(calls[x], active[n])]
        assert not hit, f"{x} measured while {hit} ran"
    waits = {t["key"]: t["alone_wait_s"] for t in suite.timeline}
    assert waits["ch07:x:baseline"] is not None and waits["ch07:x:optimized"] is not None
    if torch.cuda.is_available():  # ... while the device-clocked examples did run side by side
        plain = [n for n in active if not n.startswith("x:")]
        assert any(_overlap(calls[m], active[n]) for m in plain for n in plain if m != n)
        assert all(waits[k] is None for k in waits if ":x:" not in k)
    else:
        assert all(w is not None for w in waits.values())


def test_one_worker_measures_a_host_bound_variant_only_once_the_sink_is_open(tmp_path: Path) -> None:
    """MLflow's import and store open are seconds of CPU-bound Python in the parent (the BackgroundSink's
    thread): a host-clocked measurement waits until the sink is open; results queued meanwhile are all
    logged afterwards."""
    import time

    from bench.isolate.sink import BackgroundSink

    opening: list[Span] = []
    logged: list[str] = []

    class ListSink:
        def log_variant(self, result: Any, comparison: Any = None) -> str:
            logged.append(result.spec.key)
            return ""

    def open_sink() -> ListSink:
        t0 = time.time()
        time.sleep(1.5)  # the import and the store
        opening.append((t0, time.time()))
        return ListSink()

    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    _write(root, "a", log, host_bound=False)
    _write(root, "x", log, host_bound=True)
    sink = BackgroundSink(open_sink)
    kept = tmp_path / "work"
    suite = run_suite(select(discover(root)), cli_layer=FAST, sink=sink, workdir=kept, keep_workdir=True)
    sink.close()
    # one worker: only a host-bound child stops before its warm-up (it decides from its effective config;
    # on a CPU device every clock is the host's)
    jobs = [json.loads(p.read_text()) for p in kept.rglob("job.json")]
    assert len(jobs) == 4 and all(j["measure_gate"] == "host_bound" for j in jobs)
    assert [v.status for v in suite.variants] == ["ok"] * 4
    assert sorted(logged) == sorted(v.spec.key for v in suite.variants)  # nothing lost while it opened
    _, calls = _intervals(log)
    for x in calls:  # the measurement, batch and recheck calls: none while the sink opened
        assert not _overlap(calls[x], opening), f"{x} measured while the sink opened"
    waits = {t["key"]: t["alone_wait_s"] for t in suite.timeline}
    assert waits["ch07:x:baseline"] is not None and waits["ch07:a:baseline"] is not None
    assert suite.variants[0].ahead_s is None and suite.variants[1].ahead_s is not None


def test_several_workers_report_no_start_ahead_for_a_first_child(tmp_path: Path) -> None:
    """Every child of several workers is held at a gate (open from the start for a worker's first): that
    is no start ahead, nor lateness, and the child is not run twice."""
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    for name in "ab":
        _write(root, name, log, host_bound=False)
    suite = run_suite(select(discover(root)), cli_layer=FAST, workers=[{}, {}])
    by: dict[str, Any] = {v.spec.key: v for v in suite.variants}
    for name in "ab":
        first, second = by[f"ch07:{name}:baseline"], by[f"ch07:{name}:optimized"]
        assert first.ahead_s is None and first.gate_late_s is None and "again" not in (first.launch or "")
        assert second.ahead_s is not None
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(r["what"] == "setup" for r in rows) == 4  # each child once


def test_the_child_decides_whether_it_waits_to_measure() -> None:
    """With one worker only a host-clocked child stops before its warm-up; with several, every child."""
    from bench.define.config import host_clocked, resolve_config

    assert host_clocked(resolve_config({"timing_mode": "cpu"}), "cuda:0")
    assert host_clocked(resolve_config({"timing_mode": "pytorch"}), "cuda:0")  # Timer: wall clock + sync
    assert not host_clocked(resolve_config({"timing_mode": "cuda_event"}), "cuda:0")
    assert not host_clocked(resolve_config({}), "cuda:0")  # "auto": a GPU clock on a GPU
    assert host_clocked(resolve_config({}), "cpu")  # every clock on a CPU device is the host's
    assert host_clocked(resolve_config({"timing_mode": "cuda_event"}), "cpu")  # falls back to the cpu clock


@pytest.mark.slow  # fresh interpreters (11 s); the forked children's same wait is in the fast tier
def test_cold_started_children_wait_to_measure_too(tmp_path: Path) -> None:
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    _write(root, "a", log, host_bound=False)
    _write(root, "x", log, host_bound=True)
    suite = run_suite(select(discover(root)), cli_layer=FAST, workers=[{}, {}], cold_start=True)
    assert all(v.status == "ok" and v.launch == "cold_start" for v in suite.variants), [v.error for v in suite.variants]
    assert all(c.verification.verified for c in suite.comparisons)
    waits = {t["key"]: t["alone_wait_s"] for t in suite.timeline}
    assert waits["ch07:x:baseline"] is not None and waits["ch07:a:baseline"] is not None  # CPU: all host-clocked
