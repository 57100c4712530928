"""bench/isolate/workers.py + runner.Gate: each variant's child starts while the previous one finishes, and is
held before its benchmark's setup() until the previous child has exited.

What must hold (and what these tests would catch): the next child really starts early (its benchmark
object is built before the previous child's teardown ends), its setup() never begins before the previous
child is gone (so no measurement ever shares the device with another variant's child), the wait at the
gate counts against no stage limit, a child that fails before its gate runs again plainly, an
interrupted suite leaves no child held at a gate, and ``overlap=False`` starts nothing early.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from bench.define.discovery import discover, select
from bench.isolate.suite import run_suite

FAST = {"warmup": 1, "iterations": 3, "min_warmup_seconds": 0.0, "device": "cpu", "min_rounds": 1, "max_rounds": 1}

# A benchmark that appends events (what, when, its pid) to EVENTS; in setup() it also records whether
# the previous variant's child (the last pid seen in EVENTS other than its own) still exists.
BENCH = """
import json, os, time
EVENTS = {events!r}
TEARDOWN_S = {teardown_s!r}
FACTORY_S = {factory_s!r}
FAIL_ONCE = {fail_once!r}
CONFIG = {config!r}

def _log(what, **extra):
    with open(EVENTS, "a") as f:
        f.write(json.dumps({{"what": what, "t": time.time(), "pid": os.getpid(), "name": {name!r}, **extra}}) + "\\n")

def _others():
    with open(EVENTS) as f:
        rows = [json.loads(line) for line in f]
    return [r["pid"] for r in rows if r["pid"] != os.getpid()]

def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

class B:
    def get_config(self):
        return CONFIG or None
    def setup(self):
        import torch
        others = _others()
        _log("setup", previous_alive=_alive(others[-1]) if others else None)
        self.x = torch.arange(8.0) + 1
        self.out = torch.empty(8)
    def benchmark_fn(self):
        self.out.copy_(self.x)
    def get_output(self):
        return self.out
    def teardown(self):
        time.sleep(TEARDOWN_S)
        _log("teardown_end")

def get_benchmark():
    if FAIL_ONCE and os.path.exists(FAIL_ONCE):
        os.unlink(FAIL_ONCE)
        _log("failed_ahead")
        raise RuntimeError("fails once, ahead")
    time.sleep(FACTORY_S)
    _log("factory")
    return B()
"""


def write(
    root: Path,
    name: str,
    events: Path,
    teardown_s: float = 0.0,
    fail_once: str = "",
    optimized_config: Any = None,
    factory_s: float = 0.0,
) -> None:
    for variant in ("baseline", "optimized"):
        path = root / "ch07" / f"{variant}_{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = BENCH.format(
            events=str(events), fail_once=fail_once, name=f"{name}:{variant}", factory_s=factory_s,
            teardown_s=0.0 if variant == "optimized" and optimized_config else teardown_s,
            config=optimized_config if variant == "optimized" else None,
        )  # fmt: skip
        path.write_text(text)


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_next_variant_starts_early_but_sets_up_only_after_the_previous_exited(tmp_path: Path) -> None:
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    write(root, "a", log, teardown_s=0.4)
    write(root, "b", log, teardown_s=0.4)
    suite = run_suite(select(discover(root)), cli_layer=FAST)
    assert all(v.status == "ok" for v in suite.variants), [v.error for v in suite.variants]
    assert all(c.verification.verified for c in suite.comparisons)
    rows = events(log)
    by = {(r["name"], r["what"]): r for r in rows}
    order = ["a:baseline", "a:optimized", "b:baseline", "b:optimized"]
    for prev, nxt in zip(order, order[1:], strict=False):
        # Started ahead: its benchmark object was built while the previous child still tore down ...
        assert by[(nxt, "factory")]["t"] < by[(prev, "teardown_end")]["t"], (prev, nxt)
        # ... but its setup() came after the previous child had exited (and was reaped).
        assert by[(nxt, "setup")]["t"] > by[(prev, "teardown_end")]["t"]
        assert by[(nxt, "setup")]["previous_alive"] is False, (prev, nxt)
    assert [v.ahead_s is not None for v in suite.variants] == [False, True, True, True]
    for prev, nxt, v in zip(order[:-1], order[1:], suite.variants[1:], strict=True):  # it waited out the teardown:
        beside = by[(prev, "teardown_end")]["t"] - by[(nxt, "factory")]["t"]  # counted as ahead
        assert v.ahead_s is not None and v.ahead_s >= beside - 0.05, (v.spec.key, v.ahead_s, beside)
    # Each was at its gate long before it opened: no worker waited for a child's start.
    assert [v.gate_late_s for v in suite.variants] == [None, 0.0, 0.0, 0.0]
    # The wait is nobody's stage time: setup() itself is quick.
    setup = {v.spec.key: next(s for s in v.stages if s.name == "setup") for v in suite.variants}
    assert all(s.duration_s is not None and s.duration_s < 0.3 for s in setup.values()), setup


def test_a_child_still_starting_when_its_gate_opens_is_recorded_late(tmp_path: Path) -> None:
    """The optimized child's start (here a 0.8 s get_benchmark(); on a GPU its CUDA context) outlasts the
    baseline's end: the worker waits for it at the open gate, and that wait is reported, not hidden."""
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    write(root, "a", log, factory_s=0.8)
    suite = run_suite(select(discover(root)), cli_layer=FAST)
    base, opt = suite.variants
    assert base.status == opt.status == "ok", [v.error for v in suite.variants]
    assert base.gate_late_s is None and opt.ahead_s is not None
    assert opt.gate_late_s is not None and 0.3 < opt.gate_late_s < opt.elapsed_s, opt.gate_late_s
    late = suite.time_breakdown()["late_s"]
    assert late == pytest.approx(opt.gate_late_s)
    gated = [e for e in events(log) if e["name"] == "a:optimized"]
    assert [e["what"] for e in gated] == ["factory", "setup", "teardown_end"]  # one child: late, not re-run


def _slow_compare(monkeypatch: pytest.MonkeyPatch, times: list[tuple[float, float]]) -> None:
    """The workers' compare (an example's rounds': bench.isolate.rounds), 0.8 s slower; (start, end) of each call
    appended to ``times``."""
    import bench.isolate.rounds as rounds_module

    real = rounds_module.compare

    def slow(baseline: Any, optimized: Any, **kwargs: Any) -> Any:
        t0 = time.time()
        time.sleep(0.8)
        out = real(baseline, optimized, **kwargs)
        times.append((t0, time.time()))
        return out

    monkeypatch.setattr(rounds_module, "compare", slow)


@pytest.mark.parametrize("gpu", [True, False])
def test_a_gpu_variant_is_compared_beside_the_next_one_a_cpu_variant_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: bool
) -> None:
    """Once a GPU variant's child has exited, the next variant's gate opens: it sets up and measures while
    the pair's outputs are compared (on the CPU) and logged. A CPU variant's measurement would share the
    CPU with that comparison, so there the comparison comes first. (The rule, workers._compare_beside, is
    forced on for the GPU case: these are CPU benchmarks.)"""
    import bench.isolate.workers as workers_module

    if gpu:
        monkeypatch.setattr(workers_module, "_compare_beside", lambda result: True)
    compares: list[tuple[float, float]] = []
    _slow_compare(monkeypatch, compares)
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    write(root, "a", log)
    write(root, "b", log)
    suite = run_suite(select(discover(root)), cli_layer=FAST)
    assert all(v.status == "ok" for v in suite.variants), [v.error for v in suite.variants]
    assert all(c.verification.verified for c in suite.comparisons) and len(compares) == 2
    by = {(r["name"], r["what"]): r for r in events(log)}
    setup_b = by[("b:baseline", "setup")]
    assert setup_b["previous_alive"] is False  # either way, only once a:optimized's child is gone
    if gpu:
        assert setup_b["t"] < compares[0][1]  # b set up while a's outputs were still being compared
    else:
        assert setup_b["t"] > compares[0][1]
    beside = {t["key"]: t["beside"] for t in suite.timeline}
    assert beside == {
        "ch07:a:baseline": gpu, "ch07:a:optimized": gpu, "ch07:b:baseline": gpu, "ch07:b:optimized": False
    }  # fmt: skip
    b = suite.time_breakdown()
    assert b["compare_s"] > 1.6
    assert b["compare_beside_s"] == (pytest.approx(b["compare_s"] / 2, rel=0.2) if gpu else 0.0)


@pytest.mark.parametrize(
    ("device", "config", "beside"),
    [("cuda:0", {}, True), ("cpu", {}, False), ("cuda:0", {"enable_profiling": True}, False)],
)
def test_a_profiled_gpu_variant_is_not_compared_beside_the_next_one(device: str, config: dict, beside: bool) -> None:
    """A variant whose resolved config profiles it (the CLI's --profile, or the benchmark's own get_config())
    runs its profile children on the GPU after its child exits: the next variant's gate must stay shut until
    they are done, or its measurement would share the GPU with a profiled run."""
    from bench.define.result import VariantResult, VariantSpec
    from bench.isolate.workers import _compare_beside

    spec = VariantSpec(chapter="ch13", example="x", variant="baseline", path="/x")
    assert _compare_beside(VariantResult(spec=spec, status="ok", device=device, config=config)) is beside


def test_the_wait_at_the_gate_counts_against_no_stage_limit(tmp_path: Path) -> None:
    """The baseline's teardown (1.5 s, within its limit of 30 s) outlasts the optimized variant's own
    set-up limit (1 s, from its get_config(); its own teardown is quick); held at its gate meanwhile, it
    must not time out."""
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    write(root, "a", log, teardown_s=1.5, optimized_config={"setup_timeout_seconds": 1.0})
    suite = run_suite(select(discover(root)), cli_layer=FAST)
    assert [v.status for v in suite.variants] == ["ok", "ok"], [v.error for v in suite.variants]
    assert suite.variants[1].config["setup_timeout_seconds"] == 1.0
    assert (suite.variants[1].ahead_s or 0) > 1.5


def test_a_child_that_fails_before_its_gate_runs_again_plainly(tmp_path: Path) -> None:
    """A failure while started ahead is never the variant's record: it runs once more, not ahead."""
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    marker = tmp_path / "fail-once"
    write(root, "a", log, fail_once=str(marker))
    (root / "ch07" / "baseline_a.py").write_text(
        (root / "ch07" / "baseline_a.py").read_text().replace(f"FAIL_ONCE = {str(marker)!r}", "FAIL_ONCE = ''")
    )
    marker.touch()
    suite = run_suite(select(discover(root)), cli_layer=FAST)
    base, opt = suite.variants
    assert [e["what"] for e in events(log) if e["name"] == "a:optimized"][:2] == ["failed_ahead", "factory"]
    assert opt.status == "ok" and opt.ahead_s is None
    assert opt.launch is not None and "without starting ahead" in opt.launch
    assert suite.comparisons[0].verification.verified


def test_a_benchmark_that_always_fails_is_recorded_after_its_plain_run(tmp_path: Path, write_benchmark: Any) -> None:
    root = tmp_path / "chapters"
    write_benchmark(root / "ch07" / "baseline_a.py")
    write_benchmark(root / "ch07" / "optimized_a.py", extra="def get_benchmark():\n    raise ValueError('no')\n")
    suite = run_suite(select(discover(root)), cli_layer=FAST)
    opt = suite.variants[1]
    assert opt.status == "failed" and opt.failed_stage == "setup" and "ValueError: no" in (opt.error.message or "")
    assert "without starting ahead" in (opt.launch or "")


def test_interrupted_suite_kills_the_child_held_at_its_gate(tmp_path: Path) -> None:
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    write(root, "a", log, teardown_s=0.5)
    write(root, "b", log)

    def interrupt(result: Any, comparison: Any) -> None:
        raise KeyboardInterrupt  # Ctrl-C as example a's results come in; b's baseline waits at its gate

    with pytest.raises(KeyboardInterrupt):
        run_suite(select(discover(root)), cli_layer=FAST, on_result=interrupt)
    held = [e for e in events(log) if e["name"] == "b:baseline"]
    assert [e["what"] for e in held] == ["factory"]  # it had started ahead, and never set up
    deadline = time.monotonic() + 5
    while _alive(held[0]["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(held[0]["pid"]), "the child held at its gate survived the interrupted suite"


def test_without_overlap_nothing_starts_early(tmp_path: Path) -> None:
    root, log = tmp_path / "chapters", tmp_path / "events.jsonl"
    log.touch()
    write(root, "a", log, teardown_s=0.3)
    suite = run_suite(select(discover(root)), cli_layer=FAST, overlap=False)
    by = {(r["name"], r["what"]): r for r in events(log)}
    assert by[("a:optimized", "factory")]["t"] > by[("a:baseline", "teardown_end")]["t"]
    assert all(v.ahead_s is None for v in suite.variants)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie no one reaped yet counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
