"""bench/isolate/ranks.py (and bench/measure/collective.py): variants of several ranks, for real, as gloo processes.

Each case is a variant whose config says world_size > 1, run through the harness like any other: its child
coordinates ranks started through torch.multiprocessing, which join a gloo group and time an all-reduce. The
faults (an exception, a kill, a hang, a skip, a replaced clock) happen on rank 1 only: what the parent sees must
name it, and no rank may outlive the variant.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.define.config import resolve_config
from bench.define.discovery import discover, select
from bench.errors import Skip
from bench.isolate import ranks
from bench.isolate.process import child_env
from bench.isolate.runner import run_variant
from bench.isolate.suite import run_suite
from bench.isolate.workers import Lane

BENCH = """
import os, signal, time
import torch
import torch.distributed as dist
from bench import BenchmarkConfig, context

WORLD = {world}
FAULT = {fault!r}  # (rank, what, stage) or None
WRONG_ON = {wrong_on!r}  # a rank whose answer is off, or None
DRIFT_ON = {drift_on!r}  # a rank whose calls change its input: each call runs on what the last one left
PIDS = {pids!r}

class AllReduce:
    def get_config(self):
        # a hung rank's measurement ends in 3 s; the other variants keep the default limits (three gloo ranks' batch
        # stage can take more than 12 s on a loaded 2-core host)
        hang = FAULT is not None and FAULT[1] == "hang"
        return BenchmarkConfig(world_size=WORLD, **({{"measurement_timeout_seconds": 3.0}} if hang else {{}}))

    def setup(self):
        ctx = context()
        self.rank = ctx.rank
        assert (ctx.world_size, dist.get_world_size(), dist.get_rank()) == (WORLD, WORLD, ctx.rank)
        with open(os.path.join(PIDS, f"rank{{ctx.rank}}.pid"), "w") as f:
            f.write(str(os.getpid()))
        self._fault("setup")
        g = torch.Generator(device=ctx.device).manual_seed(ctx.seed + ctx.rank)  # every rank its own values
        self.x = torch.randn(3000, generator=g, device=ctx.device)
        self.out = torch.empty_like(self.x)

    def _fault(self, stage):
        if FAULT is None or FAULT[0] != self.rank or FAULT[2] != stage or os.environ.get("PERFLAB_STAGE") != stage:
            return
        what = FAULT[1]
        if what == "raise":
            raise ValueError("bad input on this rank")
        if what == "skip":
            context().skip("this rank lacks a thing")
        if what == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if what == "hang":
            time.sleep(1000)
        if what == "tamper":
            time.perf_counter = lambda: 0.0

    def benchmark_fn(self):
        self._fault("measurement")
        self.out.copy_(self.x)
        dist.all_reduce(self.out)
        if self.rank == WRONG_ON:
            self.out.mul_(1.5)
        if self.rank == DRIFT_ON:
            self.x.add_(1.0)

    def teardown(self):
        del self.x, self.out

    def get_output(self):
        return self.out

    def get_work(self):
        return {{"comm_bytes": self.x.numel() * 4, "bus_factor": 2 * (WORLD - 1) / WORLD}}

def get_benchmark():
    return AllReduce()
"""

# gloo processes on any host (a GPU host's NCCL ranks: test_nccl_ranks_on_the_gpus)
FAST = {"iterations": 4, "warmup": 2, "min_warmup_seconds": 0.0, "device": "cpu", "min_rounds": 1, "max_rounds": 1}
# Every variant here starts its ranks as processes of their own, each importing torch: the fast tier keeps the
# pair of ranks timed together and a fault in set-up; the rest run in the full tier.
SLOW = pytest.mark.slow


def write(path: Path, pids: Path, world: int = 2, fault: tuple[int, str, str] | None = None,
          wrong_on: int | None = None, drift_on: int | None = None) -> Path:  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    pids.mkdir(parents=True, exist_ok=True)
    path.write_text(BENCH.format(world=world, fault=fault, wrong_on=wrong_on, drift_on=drift_on, pids=str(pids)))
    return path


def gone(pids: Path) -> None:
    """Every rank that wrote its pid has exited."""
    for f in pids.glob("rank*.pid"):
        pid = int(f.read_text())
        deadline = time.monotonic() + 5.0
        while Path(f"/proc/{pid}").exists() and _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), f"{f.stem} (pid {pid}) outlived its variant"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@SLOW  # a suite of three-rank variants (real ranks in the fast tier: a fault on one rank, chapter 4's sums)
def test_ranks_time_together_and_every_ranks_answer_is_compared(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    write(tmp_path / "ch" / "ch90" / "baseline_ar.py", pids, world=3)
    write(tmp_path / "ch" / "ch90" / "optimized_ar.py", pids, world=3)
    write(tmp_path / "ch" / "ch90" / "optimized_ar_wrong.py", pids, world=3, wrong_on=2)
    # three gloo ranks' start and rendezvous took more than set-up's 30 s on a loaded 2-core host
    layer = {**FAST, "timeout_multiplier": 4.0}
    suite = run_suite(select(discover(tmp_path / "ch")), cli_layer=layer, workdir=tmp_path / "work")
    for v in suite.variants:
        assert v.status == "ok", (v.spec.key, v.error)
        t = v.timing
        assert t is not None and t.rank_samples_ms is not None and len(t.rank_samples_ms) == 3
        # each sample is the slowest rank's
        assert t.samples_ms == [max(own) for own in zip(*t.rank_samples_ms, strict=True)]
        assert "3 ranks, each sample the slowest rank's" in t.method
        assert v.sizes["world_size"] == 3 and v.sizes["backend"] == "gloo"
        assert v.output is not None and len(v.output.tensors) == 3  # rank 0's, then a sample of ranks 1 and 2
        assert v.derived_metrics()["busbw_gbps"] == pytest.approx(v.derived_metrics()["algbw_gbps"] * 4 / 3)
    by = {c.variant: c for c in suite.comparisons}
    assert by["optimized"].verification.verified, by["optimized"].verification.detail
    assert "on changed inputs" in by["optimized"].verification.detail  # the recheck ran on every rank
    # rank 0 is right, rank 2 is not: the pair is a mismatch, naming the output that holds rank 2's sample
    assert not by["optimized_wrong"].verification.verified
    assert "output[2]" in by["optimized_wrong"].verification.detail
    gone(pids)


@pytest.mark.parametrize(
    ("fault", "status", "stage", "says"),
    [
        ((1, "raise", "setup"), "failed", "setup", "rank 1 of 2: ValueError: bad input on this rank"),
        pytest.param(
            (1, "kill", "measurement"), "failed", "measurement", "rank 1 of 2 was killed by signal SIGKILL", marks=SLOW
        ),
        pytest.param(
            (1, "hang", "measurement"), "timeout", "measurement", "stage 'measurement' exceeded its limit", marks=SLOW
        ),
        pytest.param((1, "skip", "setup"), "skipped", None, "this rank lacks a thing", marks=SLOW),
        pytest.param(
            (1, "tamper", "measurement"), "invalid", "measurement", "timer replaced: time.perf_counter", marks=SLOW
        ),
    ],
)
def test_a_fault_on_one_rank_ends_the_variant_naming_it(
    tmp_path: Path, fault: tuple[int, str, str], status: str, stage: str | None, says: str
) -> None:
    pids = tmp_path / "pids"
    path = write(tmp_path / "ch" / "ch90" / "baseline_f.py", pids, fault=fault)
    spec = select(discover(tmp_path / "ch"))[0].variants[0]
    assert path.samefile(spec.path)
    r = run_variant(spec, tmp_path / "work", cli_layer=FAST)
    assert r.status == status
    assert r.failed_stage == stage
    assert says in ((r.error.message if r.error else "") + (r.skip_reason or ""))
    gone(pids)


@SLOW
def test_calls_that_run_on_what_the_last_left_on_another_rank_are_caught(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    write(tmp_path / "ch" / "ch90" / "baseline_drift.py", pids, drift_on=1)
    spec = select(discover(tmp_path / "ch"))[0].variants[0]
    r = run_variant(spec, tmp_path / "work", cli_layer=FAST)
    assert r.status == "invalid" and r.failed_stage == "recheck", r.error
    assert r.recheck is not None and r.recheck.mutated == ["rank 1: x: float32[3000]"]  # named with its rank
    assert r.recheck.restored_same_output is False
    gone(pids)


@SLOW
def test_adaptive_sampling_stops_on_every_rank_at_once(tmp_path: Path) -> None:
    """Samples until a time limit on real ranks, rank 1 slower and jittery: every rank stops at the same sample
    (the decision is taken on rank 0's clock and the slowest rank's samples: tests/bench/measure/test_collective.py),
    and the samples are rank 1's."""
    pids = tmp_path / "pids"
    path = write(tmp_path / "ch" / "ch90" / "baseline_ar.py", pids)
    slow = "        self.out.copy_(self.x)\n"
    path.write_text(path.read_text().replace(slow, "        if self.rank == 1:\n"
                                             "            time.sleep(0.001 * (1 + (self.calls % 3)))\n" + slow)
                    .replace("    def benchmark_fn(self):\n", "    calls = 0\n\n    def benchmark_fn(self):\n"
                                                                 "        self.calls += 1\n"))  # fmt: skip
    spec = select(discover(tmp_path / "ch"))[0].variants[0]
    adaptive = {
        "warmup": 2,
        "min_warmup_seconds": 0.0,
        "noise_target": 1e-6,
        "max_measure_seconds": 0.3,
        "device": "cpu",
    }
    r = run_variant(spec, tmp_path / "work", cli_layer=adaptive)
    assert r.status == "ok", str(r.error)  # whole: a repr would be cut at 240 characters
    assert r.timing is not None and r.timing.stop_reason == "max_time"
    own = r.timing.rank_samples_ms or []
    assert len(own) == 2 and len(own[0]) == len(own[1]) == len(r.timing.samples_ms) > 10
    assert min(own[1]) >= 1.0  # rank 1 slept at least 1 ms in every call: the samples are its times
    gone(pids)


@SLOW
def test_verify_sets_every_rank_up_without_timing(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    write(tmp_path / "ch" / "ch90" / "baseline_ar.py", pids, world=3)
    spec = select(discover(tmp_path / "ch"))[0].variants[0]
    r = run_variant(spec, tmp_path / "work", cli_layer=FAST, mode="verify")
    assert r.status == "ok", str(r.error)  # whole: a repr would be cut at 240 characters
    assert r.timing is None and len(list(pids.glob("rank*.pid"))) == 3
    gone(pids)


@SLOW
def test_a_fresh_interpreter_coordinates_ranks_too(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    write(tmp_path / "ch" / "ch90" / "baseline_ar.py", pids)
    spec = select(discover(tmp_path / "ch"))[0].variants[0]
    r = run_variant(spec, tmp_path / "work", cli_layer=FAST, cold_start=True)
    assert r.status == "ok", str(r.error)  # whole: a repr would be cut at 240 characters
    assert r.launch == "cold_start" and r.timing is not None and len(r.timing.rank_samples_ms or []) == 2
    gone(pids)


@SLOW
def test_beside_other_workers_the_ranks_run_alone(tmp_path: Path) -> None:
    """Two workers: the ranks' variants stop after set-up to be admitted (workers rule 3), the plain one beside."""
    pids = tmp_path / "pids"
    write(tmp_path / "ch" / "ch90" / "baseline_ar.py", pids)
    write(tmp_path / "ch" / "ch90" / "optimized_ar.py", pids)
    plain = BENCH.replace("world_size=WORLD", "world_size=1").replace("dist.all_reduce(self.out)", "")
    plain = plain.replace("assert (ctx.world_size, dist.get_world_size()", "assert (ctx.world_size, 1")
    plain = plain.replace("dist.get_rank()) == (WORLD, WORLD, ctx.rank)", "0) == (1, 1, ctx.rank)")
    for name in ("baseline_one.py", "optimized_one.py"):
        (tmp_path / "ch" / "ch91").mkdir(parents=True, exist_ok=True)
        text = plain.format(world=1, fault=None, wrong_on=None, drift_on=None, pids=str(pids))
        (tmp_path / "ch" / "ch91" / name).write_text(text)
    suite = run_suite(select(discover(tmp_path / "ch")), cli_layer=FAST, workdir=tmp_path / "work",
                      workers=[{}, {}])  # fmt: skip
    assert [v.status for v in suite.variants] == ["ok"] * 4, [(v.spec.key, v.error) for v in suite.variants]
    assert all(c.verification.verified for c in suite.comparisons)
    gone(pids)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; this host has none")
def test_nccl_ranks_on_the_gpus(tmp_path: Path) -> None:
    """On a GPU host: two NCCL ranks, one per GPU, timed with events; on a host of one GPU, skipped with the reason
    before any rank starts."""
    pids = tmp_path / "pids"
    write(tmp_path / "ch" / "ch90" / "baseline_ar.py", pids)
    write(tmp_path / "ch" / "ch90" / "optimized_ar.py", pids)
    suite = run_suite(select(discover(tmp_path / "ch")), cli_layer={**FAST, "device": "cuda"}, workdir=tmp_path / "w")
    if torch.cuda.device_count() < 2:
        assert [v.status for v in suite.variants] == ["skipped", "skipped"]
        assert suite.variants[0].skip_reason == f"needs 2 GPUs, one per rank ({torch.cuda.device_count()} visible)"
        assert not list(pids.glob("rank*.pid"))
        return
    for v in suite.variants:
        assert v.status == "ok", v.error
        assert v.sizes["backend"] == "nccl" and v.device == "cuda:0"
        assert v.timing is not None and "one-element all-reduce" in v.timing.method
    assert suite.comparisons[0].verification.verified, suite.comparisons[0].verification.detail
    gone(pids)


def test_a_gpu_host_with_too_few_gpus_skips_before_starting_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv(ranks.RANK_DEVICES, raising=False)
    with pytest.raises(Skip, match=r"needs 2 GPUs, one per rank \(1 visible\)"):
        ranks._rank_devices("auto", 2)
    monkeypatch.setenv(ranks.RANK_DEVICES, "0,1")  # the suite's two workers' GPUs: the ranks see both
    assert ranks._rank_devices("cuda", 2) == "0,1"
    assert ranks._rank_devices("cpu", 8) is None  # gloo processes: any number
    monkeypatch.delenv(ranks.RANK_DEVICES)
    with pytest.raises(Skip, match=r"^needs 2 GPUs \(1 visible\)$"):  # one process on two GPUs (config gpus=2)
        ranks._rank_devices("cuda", 2, per_rank=False)


TWO_GPUS = """
import torch
from bench import BenchmarkConfig, context


class Bench:
    def get_config(self):
        return BenchmarkConfig(gpus=2, timing_mode="cpu")

    def setup(self):
        ctx = context()
        ctx.require(gpus=2)
        ctx.record("visible", torch.cuda.device_count() if ctx.is_cuda else 0)
        g = torch.Generator(device=ctx.device).manual_seed(ctx.seed)
        self.x = torch.randn(1 << 20, device=ctx.device, generator=g)
        peer = torch.device("cuda", 1) if ctx.is_cuda else ctx.device
        self.out = torch.empty_like(self.x, device=peer)

    def benchmark_fn(self):
        self.out.copy_(self.x)

    def teardown(self):
        del self.x, self.out

    def get_output(self):
        return self.out


def get_benchmark():
    return Bench()
"""


def test_one_process_of_two_gpus_runs_plainly_on_a_cpu(tmp_path: Path) -> None:
    (tmp_path / "ch" / "ch92").mkdir(parents=True)
    (tmp_path / "ch" / "ch92" / "baseline_copy.py").write_text(TWO_GPUS.replace("ctx.require(gpus=2)", "pass"))
    spec = select(discover(tmp_path / "ch"))[0].baseline
    r = run_variant(spec, tmp_path / "work", cli_layer={**FAST, "device": "cpu"})
    assert r.status == "ok", str(r.error)  # whole: a repr would be cut at 240 characters
    assert r.config["gpus"] == 2 and r.launch != "cold_start" and r.sizes["visible"] == 0  # no rank spawned


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; this host has none")
def test_one_process_of_two_gpus_sees_both_beside_a_worker_per_gpu(tmp_path: Path) -> None:
    """gpus=2 under a worker per GPU: it runs alone and sees every worker's GPU; on one GPU, skipped saying so."""
    (tmp_path / "ch" / "ch92").mkdir(parents=True)
    for name in ("baseline_copy.py", "optimized_copy.py"):
        (tmp_path / "ch" / "ch92" / name).write_text(TWO_GPUS)
    n = torch.cuda.device_count()
    workers = [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(n)]
    suite = run_suite(select(discover(tmp_path / "ch")), cli_layer={**FAST, "device": "cuda"}, workdir=tmp_path / "w",
                      workers=workers)  # fmt: skip
    if n < 2:
        assert [v.skip_reason for v in suite.variants] == ["needs 2 GPUs (1 visible)"] * 2
        return
    for v in suite.variants:
        assert v.status == "ok", v.error
        assert v.sizes["visible"] == n and v.device == "cuda:0"
    assert suite.comparisons[0].verification.verified, suite.comparisons[0].verification.detail


def test_the_ranks_get_every_workers_gpu_and_multicast_stays_off() -> None:
    class Fake:
        def __init__(self, env: dict[str, str], others: list[Any]) -> None:
            self.env = env
            self.host = type("H", (), {"lanes": others})()

    lanes: list[Any] = []
    lanes += [Fake({"CUDA_VISIBLE_DEVICES": "2"}, lanes), Fake({"CUDA_VISIBLE_DEVICES": "3"}, lanes)]
    assert Lane._env(lanes[1]) == {"CUDA_VISIBLE_DEVICES": "3", ranks.RANK_DEVICES: "2,3"}  # type: ignore[arg-type]
    alone: list[Any] = []
    alone.append(Fake({}, alone))
    assert Lane._env(alone[0]) == {}  # type: ignore[arg-type]
    caller = {"NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0"}
    env = child_env(resolve_config(), caller)
    assert (env["NCCL_NVLS_ENABLE"], env["TORCH_SYMM_MEM_DISABLE_MULTICAST"]) == ("0", "1")
    assert caller == {"NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0"}  # the caller's, untouched


def test_a_rank_that_exits_between_two_looks_is_heard_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that writes its last messages and exits after the relay's select returned: what it wrote is read
    before its exit is judged (on two H200s a rank of ch04 ddp_overlap was failed as "exited before it was done")."""
    import json
    import os
    import select as select_module

    from bench.isolate import channel

    class Exited:
        exitcode = 0

        def join(self, timeout: float | None = None) -> None:
            pass

    up_read, up_write = os.pipe()  # what the relay tells the parent
    rank_read, rank_write = os.pipe()  # the rank's pipe: its last words in it, its write end still open
    for msg in ({"t": "stage", "name": "teardown", "event": "start"}, {"t": "done"}):
        os.write(rank_write, (json.dumps(msg) + "\n").encode())
    monkeypatch.setattr(channel, "_fd", up_write)
    looks = iter([([], [], [])])  # the first look sees nothing: the rank wrote and exited just after it
    real = select_module.select
    monkeypatch.setattr(ranks.select, "select", lambda *a: next(looks, None) or real(*a))

    class Exit(Exception):
        pass

    def exit_(code: int) -> None:
        raise Exit(code)

    monkeypatch.setattr(ranks.os, "_exit", exit_)

    class Reader:
        def fileno(self) -> int:
            return rank_read

    relay = ranks._Relay([Exited()], [Reader()])
    with pytest.raises(Exit) as ended:
        relay.run()
    os.close(up_write)
    told = os.read(up_read, 1 << 16).decode()
    assert ended.value.args == (0,) and relay.done == [True] and relay.endings == [], told
    assert '"t": "done"' in told and "exited before it was done" not in told  # rank 0's words went on to the parent
    for fd in (rank_write, rank_read, up_read):
        os.close(fd)


def _rendezvous_on_threads(tmp_path: Path, fails: dict[tuple[int, int], str], world: int = 3,
                           tries: int = 3) -> tuple[dict[int, Any], dict[int, list[str]]]:  # fmt: skip
    """``ranks.rendezvous`` on ``world`` threads sharing a real FileStore; rank r's try n raises
    ``fails[(r, n)]`` when listed. Each rank's result (its failed tries' causes, or the exception) and the
    events it went through (connect:<prefix>, leave)."""
    import threading

    import torch.distributed as dist

    path = str(tmp_path / "store")
    results: dict[int, Any] = {}
    events: dict[int, list[str]] = {r: [] for r in range(world)}

    def rank_main(rank: int) -> None:
        store = dist.FileStore(path, world)
        tried = iter(range(tries))

        def connect(prefixed: Any) -> None:
            n = next(tried)
            events[rank].append(f"connect{n}")
            if (rank, n) in fails:
                raise RuntimeError(fails[(rank, n)] + "\nmore lines")

        try:
            results[rank] = ranks.rendezvous(store, rank, world, connect, lambda: events[rank].append("leave"),
                                             tries)  # fmt: skip
        except Exception as e:
            results[rank] = e

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a rank still waits on the store"
    return results, events


def test_the_ranks_connect_at_the_first_try_and_say_nothing(tmp_path: Path) -> None:
    results, events = _rendezvous_on_threads(tmp_path, {})
    assert results == {0: [], 1: [], 2: []}
    assert all(e == ["connect0"] for e in events.values())


def test_one_ranks_failed_connection_makes_every_rank_try_again(tmp_path: Path) -> None:
    """Rank 1's mesh failed on the first try, ranks 0 and 2 connected: all three leave and connect again, and
    every one knows the first try's cause."""
    results, events = _rendezvous_on_threads(tmp_path, {(1, 0): "Gloo connectFullMesh failed with reset"})
    cause = "rank 1: RuntimeError: Gloo connectFullMesh failed with reset"
    assert results == {0: [cause], 1: [cause], 2: [cause]}
    assert all(e == ["connect0", "leave", "connect1"] for e in events.values())


def test_a_rank_that_never_connects_fails_the_set_up_on_every_rank(tmp_path: Path) -> None:
    fails = {(2, n): f"no mesh {n}" for n in range(2)}
    results, events = _rendezvous_on_threads(tmp_path, fails, tries=2)
    assert isinstance(results[2], RuntimeError) and str(results[2]).startswith("no mesh 1")
    for r in (0, 1):
        assert isinstance(results[r], RuntimeError)
        assert str(results[r]) == "the ranks could not connect in 2 tries; last: rank 2: RuntimeError: no mesh 1"
    assert all(e == ["connect0", "leave", "connect1", "leave"] for e in events.values())


LATE = """
import threading, time
import torch
import torch.distributed as dist
from bench import BenchmarkConfig, context


class Late:
    def get_config(self):
        return BenchmarkConfig(world_size=2)

    def setup(self):
        self.x = torch.randn(2048, generator=torch.Generator().manual_seed(context().rank))
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        dist.all_reduce(torch.ones(1))
        if dist.get_rank() == 1:  # rank 1 writes its answer after the call returned, on a thread of its own
            threading.Thread(target=lambda: (time.sleep(0.005), self.out.copy_(self.x * 2))).start()
        else:
            self.out.copy_(self.x * 2)

    def get_output(self):
        return self.out

    def teardown(self):
        pass


def get_benchmark():
    return Late()
"""


@pytest.mark.slow  # a variant of two ranks, ~10-20 s
def test_an_output_one_rank_finishes_after_its_call_is_not_the_calls(tmp_path: Path) -> None:
    """The first look of bench.isolate.produced on every rank, rank 0 telling what rank 1 found."""
    from dataclasses import replace

    from bench.cli.ab import examples_of

    for name in ("baseline.py", "optimized.py"):
        (tmp_path / name).write_text(LATE)
    (example,) = examples_of([tmp_path / "baseline.py", tmp_path / "optimized.py"])
    layer = {**FAST, "measure_batch": False, "timeout_multiplier": 8.0}
    (v,) = run_suite([replace(example, optimized=[])], cli_layer=layer, workdir=tmp_path / "work").variants
    assert v.output is not None and v.output.produced is not None and v.output.produced.threads_left >= 1
    assert v.status == "invalid" and v.failed_stage == "check", (v.status, v.error)
    assert v.output.produced.settled is False  # rank 1's sample moved after its call returned
    assert v.error.message.startswith("the output changed after benchmark_fn() returned: its work ran on after")
