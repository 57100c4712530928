"""The isolation matrix: bench/isolate/runner.py + bench/isolate/suite.py against benchmarks that hang, crash or cheat.

Every case is a real child process running a fixture benchmark (tests/fixtures/benchmark_template.py
with knobs). Each child imports torch (~2 s here), so all cases start together in a module-scoped
pool and each test waits for the result it checks.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.define.discovery import discover, select
from bench.define.result import STAGES, SuiteResult, VariantResult
from bench.isolate.runner import run_variant
from bench.isolate.suite import run_suite
from bench.record.summary import summary_dict, summary_markdown

# The fixture benchmarks put their tensors on the run's device: with device "auto" a GPU host runs them on its GPU
# (clock: CUDA events), which these tests accept.
DEVICE, CLOCK = ("cuda:0", "cuda_event") if torch.cuda.is_available() else ("cpu", "cpu")
# Stage limits for the hang cases: 1 s × multiplier 2 = 2 s, so the multiplier is exercised too.
# Startup keeps its default: importing torch alone takes ~2 s here.
TIGHT = {
    "setup_timeout_seconds": 1.0,
    "warmup_timeout_seconds": 1.0,
    "first_call_timeout_seconds": 1.0,  # the fixture hangs in its first warm-up call
    "measurement_timeout_seconds": 1.0,
    "timeout_multiplier": 2.0,
}
TIGHT_LIMIT_S = 2.0
# Enough to start a child, far below the 1000 s a hung fixture sleeps.
WELL_BELOW_THE_HANG_S = 60.0
# No warm-up time floor for the cpu clock: the fault fixtures count calls to know warm-up from measurement.
FAST = {"warmup": 2, "iterations": 3, "min_warmup_seconds": 0.0, "min_rounds": 1, "max_rounds": 1}

# The suite: (file, knobs). Layers: suite config < get_config() < CLI. The seed stays the same
# for every variant: baseline and optimized must see the same inputs.
SUITE_LAYER = {"percentiles": [10.0], "warmup": 9, "iterations": 9}
CLI_LAYER = {"iterations": 5, "warmup": 2, "min_rounds": 1, "max_rounds": 1}
SUITE_FILES: dict[str, dict[str, Any]] = {
    "ch07/baseline_x.py": {"CONFIG": {"iterations": 7, "percentiles": [99.9]}},
    "ch07/optimized_x.py": {},
    "ch07/optimized_x_wrong.py": {"SCALE": 2.5},
    "ch07/optimized_x_nooutput.py": {"extra": "del Bench.get_output"},
    "ch07/optimized_x_precomputed.py": {"OUTPUT": "precomputed"},
    "ch07/optimized_x_rejected.py": {"VALIDATION": "row sums differ from the reference"},
    "ch07/baseline_zeros.py": {"OUTPUT": "zeros"},
    "ch07/optimized_zeros.py": {"OUTPUT": "zeros"},
    "ch07/baseline_broken.py": {"FAULT": ("setup", "raise")},
    "ch07/optimized_broken.py": {},
    "ch07/baseline_tf32.py": {"SET_TF32": True},
}


# A ceiling the benchmark states beside its work (get_work()): what a PCIe-bound pair declares.
STATED = {"bytes": 1e6, "ceiling": "copies at the measured PCIe rate", "ceiling_ms": 0.5, "ceiling_target_pct": 80.0}


def single_cases(pid_dir: Path) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]]:
    """name → (knobs, suite layer, CLI layer) for cases run alone through run_variant."""
    return {
        "hang_setup": ({"FAULT": ("setup", "hang")}, None, {**TIGHT, **FAST}),
        "hang_warmup": ({"FAULT": ("warmup", "hang")}, None, {**TIGHT, **FAST}),
        "hang_measurement": ({"FAULT": ("measurement", "hang")}, None, {**TIGHT, **FAST}),
        "grandchild": (
            {"FAULT": ("setup", "grandchild"), "PID_FILE": str(pid_dir / "grandchild.pid")},
            None,
            {**TIGHT, **FAST},
        ),
        "own_setup_limit": (
            {"SETUP_SLEEP": 3.0, "CONFIG": {"setup_timeout_seconds": 10.0}},
            {"setup_timeout_seconds": 1.0},
            FAST,
        ),
        "suite_setup_limit": ({"SETUP_SLEEP": 3.0}, {"setup_timeout_seconds": 1.0}, FAST),
        "segfault_warmup": ({"FAULT": ("warmup", "segfault")}, None, FAST),
        "exit7_measurement": ({"FAULT": ("measurement", "exit7")}, None, FAST),
        "no_get_benchmark": ({"extra": "del get_benchmark"}, None, FAST),
        "stated_ceiling": ({"extra": f"Bench.get_work = lambda self: {STATED!r}"}, None, FAST),
        "bad_ceiling": ({"extra": f"Bench.get_work = lambda self: {STATED | {'ceiling_ms': -1.0}!r}"}, None, FAST),
        "forked_grandchild": (
            {"FAULT": ("setup", "fork"), "PID_FILE": str(pid_dir / "forked.pid")},
            None,
            {**FAST, "setup_timeout_seconds": 20.0},
        ),
    }


# The whole matrix runs on both launch paths (STYLE 12): a fork of the pre-warmed server, the default,
# and a brand-new interpreter per variant (--cold-start).
@pytest.fixture(scope="module", params=["server", pytest.param("cold_start", marks=pytest.mark.slow)])  # a fresh
# interpreter per case: the full tier (the fast tier starts some cold elsewhere: test_ranks, test_host_bound)
def matrix(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, write_benchmark: Any
) -> Iterator[dict[str, Future[Any]]]:
    cold = request.param == "cold_start"
    root = tmp_path_factory.mktemp("isolation")
    suite_root = root / "suite_chapters"
    for rel, knobs in SUITE_FILES.items():
        write_benchmark(suite_root / rel, **knobs)
    seen: list[tuple[str, bool]] = []
    pool = ThreadPoolExecutor(max_workers=3)
    futures: dict[str, Future[Any]] = {
        "suite": pool.submit(
            run_suite,
            select(discover(suite_root)),
            suite_layer=SUITE_LAYER,
            cli_layer=CLI_LAYER,
            on_result=lambda r, c: seen.append((r.spec.key, c is not None)),
            workdir=root / "suite_work",
            keep_workdir=True,
            cold_start=cold,
        )
    }
    single_root = root / "single_chapters"
    cases = single_cases(root)
    for name, (knobs, _, _) in cases.items():
        write_benchmark(single_root / "ch07" / f"baseline_{name}.py", **knobs)
    catalog = discover(single_root)
    for name, (_, suite_layer, cli_layer) in cases.items():
        spec = catalog.examples[f"ch07:{name}"].baseline
        futures[name] = pool.submit(
            run_variant, spec, root / "work" / name, suite_layer=suite_layer, cli_layer=cli_layer, cold_start=cold
        )
    futures["seen"] = Future()
    futures["seen"].set_result(seen)
    yield futures
    pool.shutdown(wait=True)


def get(matrix: dict[str, Future[Any]], name: str) -> Any:
    return matrix[name].result(timeout=300)


@pytest.fixture(scope="module")
def suite(matrix: dict[str, Future[Any]]) -> SuiteResult:
    return get(matrix, "suite")


def by_key(suite: SuiteResult, key: str) -> VariantResult:
    return next(v for v in suite.variants if v.spec.key == key)


def pair(suite: SuiteResult, example: str, variant: str) -> Any:
    return next(c for c in suite.comparisons if c.example == example and c.variant == variant)


def stage_status(result: VariantResult) -> dict[str, str]:
    return {s.name: s.status for s in result.stages}


def pid_gone(pid: int, wait_s: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (gone, or a zombie waiting for init to reap it)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        if "\nState:\tZ" in state:
            return True
        time.sleep(0.1)
    return False


# ------------------------------------------------------------------------------------ success


def test_ok_run_has_every_stage_record_and_data(suite: SuiteResult) -> None:
    r = by_key(suite, "ch07:x:baseline")
    assert r.status == "ok", r.error
    assert r.failed_stage is None and r.error is None and r.limit_s is None
    expected = [s for s in STAGES if s not in ("profiling", "energy")]  # energy: only with measure_energy
    assert [s.name for s in r.stages] == expected
    for s in r.stages:
        assert s.status == "ok" and s.duration_s is not None and s.duration_s >= 0 and s.limit_s
    assert r.device == DEVICE
    assert r.timing is not None and r.timing.mode == CLOCK
    assert len(r.timing.samples_ms) == 5 and all(x > 0 for x in r.timing.samples_ms)
    # The CPU clock warms up for at least 0.3 s (CpuClock.min_warmup_s) and records the calls it made.
    assert r.timing.warmup_calls == 2 if CLOCK != "cpu" else r.timing.warmup_calls > 2
    assert r.timing.first_call_ms is not None
    assert r.memory is not None and r.memory.rss_peak_mb is not None and r.memory.rss_peak_mb > 0
    assert r.work is not None and r.derived_metrics()["achieved_gbps"] > 0
    assert r.output is not None and r.output.timed_calls_wrote_output is True
    assert [(t.shape, t.dtype) for t in r.output.tensors] == [([4096], "float32")]
    assert r.manifest["numerics"]["allow_tf32_matmul"] is False


def test_config_layers_reach_the_child(suite: SuiteResult) -> None:
    base = by_key(suite, "ch07:x:baseline")  # get_config(): iterations 7, percentiles [99.9]
    assert base.config["iterations"] == 5  # CLI beats get_config()
    assert base.config["percentiles"] == [99.9]  # get_config() beats the suite config
    assert base.config["warmup"] == 2  # CLI beats the suite config
    assert base.timing is not None and len(base.timing.samples_ms) == 5
    assert "p99_9" in base.timing.stats.percentiles_ms and "p10" not in base.timing.stats.percentiles_ms
    opt = by_key(suite, "ch07:x:optimized")  # no get_config()
    assert (opt.config["iterations"], opt.config["percentiles"], opt.config["warmup"]) == (5, [10.0], 2)
    assert opt.timing is not None and "p10" in opt.timing.stats.percentiles_ms


def test_good_pair_verified(suite: SuiteResult) -> None:
    c = pair(suite, "x", "optimized")
    assert c.status == "ok" and c.verification.verified, c.verification.detail
    assert c.speedup is not None and c.speedup > 0


def test_benchmark_flipping_tf32_is_recorded_and_unpaired_reported(suite: SuiteResult) -> None:
    r = by_key(suite, "ch07:tf32:baseline")
    assert r.status == "ok"
    assert r.manifest["numerics"]["allow_tf32_matmul"] is True
    assert suite.unpaired == ["ch07:tf32"]


def test_every_variant_reported_in_order(matrix: dict[str, Future[Any]], suite: SuiteResult) -> None:
    seen = get(matrix, "seen")
    assert [k for k, _ in seen] == [v.spec.key for v in suite.variants]
    assert len(seen) == len(SUITE_FILES)
    assert all(has_pair == (not key.endswith(":baseline")) for key, has_pair in seen)


# ------------------------------------------------------------------------------- wrong results


def test_wrong_output_is_mismatch_and_not_a_success(suite: SuiteResult) -> None:
    assert by_key(suite, "ch07:x:optimized_wrong").status == "ok"  # it ran; its answer is wrong
    c = pair(suite, "x", "optimized_wrong")
    assert c.status == "mismatch" and not c.verification.verified
    assert c.speedup is not None  # reported, but not counted
    summary = summary_dict(suite)
    good = pair(suite, "x", "optimized")
    assert summary["geomean_speedup_verified"] == pytest.approx(good.speedup)  # the only ok pair
    row = next(p for p in summary["pairs"] if p["variant"] == "optimized_wrong")
    assert row["verified"] is False
    shown = next(line for line in summary_markdown(summary).splitlines() if "| optimized_wrong |" in line)
    assert "| mismatch |" in shown and "faster" not in shown  # its speedup shown, its verdict not a success


def test_no_get_output_is_unverified(suite: SuiteResult) -> None:
    r = by_key(suite, "ch07:x:optimized_nooutput")
    assert r.status == "ok" and r.output is not None and r.output.path is None
    c = pair(suite, "x", "optimized_nooutput")
    assert c.status == "unverified" and not c.verification.verified


def test_an_output_of_zeros_whatever_the_inputs_is_invalid(suite: SuiteResult) -> None:
    """Zeros tell right from wrong no better than a constant: the output did not follow its changed inputs."""
    r = by_key(suite, "ch07:zeros:baseline")
    assert r.status == "invalid" and r.failed_stage == "recheck"
    assert r.error is not None and "did not change" in r.error.message
    c = pair(suite, "zeros", "optimized")
    assert c.status == "failed" and not c.verification.verified


def test_output_precomputed_in_setup_is_invalid(suite: SuiteResult) -> None:
    r = by_key(suite, "ch07:x:optimized_precomputed")
    assert r.status == "invalid" and r.failed_stage == "check"
    assert r.error is not None and r.error.kind == "invalid" and "NaN poison" in r.error.message
    assert r.output is not None and r.output.timed_calls_wrote_output is False
    assert pair(suite, "x", "optimized_precomputed").status == "failed"


def test_validate_result_message_makes_variant_invalid(suite: SuiteResult) -> None:
    r = by_key(suite, "ch07:x:optimized_rejected")
    assert r.status == "invalid" and r.failed_stage == "check"
    assert r.error is not None and "row sums differ from the reference" in r.error.message
    assert pair(suite, "x", "optimized_rejected").status == "failed"


# ------------------------------------------------------------------------------------ failures


def test_exception_in_setup_is_failed_with_traceback(suite: SuiteResult) -> None:
    r = by_key(suite, "ch07:broken:baseline")
    assert r.status == "failed" and r.failed_stage == "setup"
    assert r.error is not None and r.error.kind == "exception"
    assert "planted failure in setup" in r.error.message
    assert r.error.traceback is not None and "planted_failure_in_setup" in r.error.traceback
    assert stage_status(r) == {
        "startup": "ok", "setup": "failed", "warmup": "not_reached", "measurement": "not_reached",
        "check": "not_reached", "batch": "not_reached", "recheck": "not_reached", "teardown": "not_reached",
    }  # fmt: skip
    assert r.timing is None


def test_suite_runs_on_after_a_failed_variant(suite: SuiteResult) -> None:
    assert by_key(suite, "ch07:broken:optimized").status == "ok"
    c = pair(suite, "broken", "optimized")
    assert c.status == "failed" and c.speedup is None and not c.verification.verified
    assert c.verification.detail.startswith("baseline failed")
    assert not suite.all_ok


@pytest.mark.parametrize("stage", ["setup", "warmup", "measurement"])
def test_hang_is_killed_at_the_stage_limit(matrix: dict[str, Future[Any]], stage: str) -> None:
    r = get(matrix, f"hang_{stage}")
    assert r.status == "timeout" and r.failed_stage == stage
    assert r.limit_s == pytest.approx(TIGHT_LIMIT_S)
    assert r.error is not None and r.error.kind == "timeout" and stage in r.error.message
    field = "first_call" if "in its first call" in r.error.message else stage  # the field that sets the limit
    assert f"raise {field}_timeout_seconds or --timeout-multiplier" in r.error.message, r.error.message
    assert r.elapsed_s < WELL_BELOW_THE_HANG_S
    records = {s.name: s for s in r.stages}
    hung = records[stage]
    assert hung.status == "timeout" and hung.limit_s == pytest.approx(TIGHT_LIMIT_S)
    assert hung.duration_s is not None and TIGHT_LIMIT_S * 0.9 <= hung.duration_s < WELL_BELOW_THE_HANG_S
    order = [s.name for s in r.stages]
    for name in order[: order.index(stage)]:
        assert records[name].status == "ok"
    for name in order[order.index(stage) + 1 :]:
        assert records[name].status == "not_reached"
    assert r.timing is None


def test_segfault_is_a_crash_with_the_signal(matrix: dict[str, Future[Any]]) -> None:
    r = get(matrix, "segfault_warmup")
    assert r.status == "failed" and r.failed_stage == "warmup"
    assert r.error is not None and r.error.kind == "crash"
    assert r.error.exit_code == -signal.SIGSEGV
    assert "SIGSEGV" in r.error.message
    assert stage_status(r)["warmup"] == "failed" and stage_status(r)["measurement"] == "not_reached"


def test_os_exit_is_a_crash_with_the_exit_code(matrix: dict[str, Future[Any]]) -> None:
    r = get(matrix, "exit7_measurement")
    assert r.status == "failed" and r.failed_stage == "measurement"
    assert r.error is not None and r.error.kind == "crash" and r.error.exit_code == 7
    assert stage_status(r)["warmup"] == "ok" and stage_status(r)["check"] == "not_reached"


def test_missing_get_benchmark_fails_at_setup_as_a_protocol_error(matrix: dict[str, Future[Any]]) -> None:
    r = get(matrix, "no_get_benchmark")
    assert r.status == "failed" and r.failed_stage == "setup"
    assert r.error is not None and r.error.kind == "protocol" and "get_benchmark" in r.error.message


def test_a_stated_ceiling_reaches_the_result_and_a_bad_one_fails_naming_it(matrix: dict[str, Future[Any]]) -> None:
    r = get(matrix, "stated_ceiling")
    assert r.status == "ok" and r.work is not None
    assert (r.work.ceiling, r.work.ceiling_ms, r.work.ceiling_target_pct) == (
        STATED["ceiling"], STATED["ceiling_ms"], STATED["ceiling_target_pct"])  # fmt: skip
    bad = get(matrix, "bad_ceiling")
    assert bad.status == "failed" and bad.error is not None and bad.error.kind == "protocol"
    assert "get_work() returned ceiling_ms=-1.0" in bad.error.message


def test_get_config_setup_limit_takes_effect(matrix: dict[str, Future[Any]]) -> None:
    own = get(matrix, "own_setup_limit")  # setup sleeps 3 s; suite limit 1 s; get_config() 10 s
    assert own.status == "ok", own.error
    assert own.config["setup_timeout_seconds"] == 10.0
    setup = next(s for s in own.stages if s.name == "setup")
    # past the suite's 1-s limit, not killed (the parent hears of a stage's start late on a loaded host: CI read
    # 2.995 s of a 3-s sleep)
    assert setup.duration_s is not None and setup.duration_s > 2.0 and setup.limit_s == 10.0
    control = get(matrix, "suite_setup_limit")  # same sleep, no get_config(): the suite limit holds
    assert control.status == "timeout" and control.failed_stage == "setup"
    assert control.limit_s == pytest.approx(1.0)


def test_no_orphan_after_timeout(matrix: dict[str, Future[Any]]) -> None:
    r = get(matrix, "grandchild")
    assert r.status == "timeout" and r.failed_stage == "setup"
    pid_file = Path(r.spec.path).parents[2] / "grandchild.pid"
    pid = int(pid_file.read_text())  # the grandchild did start
    assert pid_gone(pid), f"grandchild {pid} (sleep 1000) survived its parent's timeout"


def test_the_server_keeps_no_child_after_the_matrix(
    matrix: dict[str, Future[Any]], request: pytest.FixtureRequest
) -> None:
    """The server outlives the suite (that is its point); what it forked for the suite must not."""
    if request.node.callspec.params["matrix"] != "server":
        pytest.skip("cold start: no server involved")
    from bench.isolate import server

    for future in matrix.values():
        future.result()  # every case of the matrix has finished
    running = [s for s in server.servers(timeout=30.0) if s.get("children")]
    assert running == [], f"server(s) still running children after the suite: {running}"


def test_forked_grandchild_neither_stalls_the_run_nor_survives(matrix: dict[str, Future[Any]]) -> None:
    # A forked worker (DataLoader-style) inherits the message pipe; the parent must not wait for it.
    r = get(matrix, "forked_grandchild")
    assert r.status == "ok", r.error
    # not the 20 s check/teardown limit; a cold start's import of torch (16 s in all on a loaded host) not counted
    startup = next(s.duration_s or 0.0 for s in r.stages if s.name == "startup")
    assert r.elapsed_s - startup < 15.0, r.stages
    pid = int((Path(r.spec.path).parents[2] / "forked.pid").read_text())
    assert pid_gone(pid), f"forked grandchild {pid} survived the run"


def test_parallel_workers_keep_example_order_and_pin_each_worker(tmp_path: Path, write_benchmark: Any) -> None:
    """--jobs / --gpus: examples spread over workers, results back in example order, pinning recorded."""
    root = tmp_path / "chapters"
    for name in ("a", "b", "c", "d"):
        write_benchmark(root / "ch07" / f"baseline_{name}.py")
        write_benchmark(root / "ch07" / f"optimized_{name}.py")
    workers = [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    suite = run_suite(select(discover(root)), cli_layer={**FAST, "device": "cpu"}, workers=workers)
    assert [v.spec.key for v in suite.variants] == [f"ch07:{n}:{v}" for n in "abcd" for v in ("baseline", "optimized")]
    assert all(v.status == "ok" for v in suite.variants), [(v.spec.key, v.status, v.error) for v in suite.variants]
    assert all(c.verification.verified for c in suite.comparisons), [c.verification.detail for c in suite.comparisons]
    by_example: dict[str, set[str | None]] = {}
    for v in suite.variants:
        by_example.setdefault(v.spec.example, set()).add(v.cuda_visible_devices)
    assert all(len(pins) == 1 for pins in by_example.values())  # a pair never straddles two workers
    assert set().union(*by_example.values()) <= {"0", "1"}


@pytest.mark.parametrize("cold", [False, True], ids=["server", "cold_start"])
def test_interrupted_parent_kills_the_child_at_once(
    tmp_path: Path, write_benchmark: Any, monkeypatch: pytest.MonkeyPatch, cold: bool
) -> None:
    """Ctrl-C while a variant runs: the parent neither waits out the stage (30 s of setup here) nor
    leaves the child running."""
    import select as select_module

    from bench.define.result import VariantSpec
    from bench.isolate import runner

    pid_file = str(tmp_path / "pid")
    path = write_benchmark(
        tmp_path / "ch07" / "baseline_slow.py", SETUP_SLEEP=30.0,
        extra=f"import os as _os\nopen({pid_file!r}, 'w').write(str(_os.getpid()))",  # the child's own pid
    )  # fmt: skip
    spec = VariantSpec(chapter="ch07", example="slow", variant="baseline", path=str(path))
    real = select_module.select
    raised: list[bool] = []

    def interrupting(*args: Any) -> Any:  # Ctrl-C once, a second into the child's setup; then select as usual
        pid = tmp_path / "pid"  # written at the benchmark's import, just before its setup sleeps
        if not raised and pid.exists() and pid.read_text() and time.time() - pid.stat().st_mtime > 1.0:
            raised.append(True)
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(runner.select, "select", interrupting)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_variant(spec, tmp_path / "wd", cli_layer={**FAST, "setup_timeout_seconds": 60.0}, cold_start=cold)
    assert time.monotonic() - t0 < 20.0
    assert pid_gone(int((tmp_path / "pid").read_text())), "the child survived its interrupted parent"
