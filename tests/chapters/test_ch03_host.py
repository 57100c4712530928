"""Chapter 3's host machinery: core sets, pinning, per-thread intra-op teams, the producer thread's ring.

The smoke run checks that each pair agrees; these check the parts whose failure would not change an
output (a thread count not applied, a worker not pinned, a producer's error swallowed into a hang) and
that a variant can be set up again after its teardown, as the harness does to re-check a call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from bench.define.protocol import load_benchmark
from chapters.ch03.common import PinWorker, Requests, _cpulist, host_cores, near_cores, pin_process
from tests.session import slow_for

CH03 = Path(__file__).resolve().parents[2] / "chapters" / "ch03"
VARIANTS = sorted(p.stem for p in CH03.glob("*_*.py") if p.stem.split("_")[0] in ("baseline", "optimized"))


pytestmark = pytest.mark.usefixtures("cpu_smoke")


def test_cpulist_parses_the_kernel_format() -> None:
    assert _cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert _cpulist("5") == {5} and _cpulist("") == set()


def test_cores_are_the_usable_ones() -> None:
    assert host_cores() == sorted(os.sched_getaffinity(0))
    assert near_cores() == host_cores()  # a CPU run: no GPU to be near


def test_pin_process_pins_every_thread_and_restores() -> None:
    saved = host_cores()
    started, stop = threading.Event(), threading.Event()
    seen: list[set[int]] = []

    def other() -> None:
        started.set()
        stop.wait()
        seen.append(os.sched_getaffinity(0))

    t = threading.Thread(target=other)
    t.start()
    started.wait()
    try:
        pin_process(saved[:1])
        assert os.sched_getaffinity(0) == set(saved[:1])
    finally:
        stop.set()
        t.join()
        pin_process(saved)
    assert seen == [set(saved[:1])]  # a thread that already existed was pinned too
    assert host_cores() == saved


def test_pin_worker_pins_its_thread_to_one_core() -> None:
    cores = host_cores()
    seen: list[set[int]] = []

    def worker() -> None:
        PinWorker(cores[-1:])(worker_id=3)
        seen.append(os.sched_getaffinity(0))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [{cores[-1]}] and os.sched_getaffinity(0) == set(cores)  # the caller is untouched


@pytest.mark.parametrize("per_thread", [1, 3])
def test_serving_threads_use_their_own_team_size(per_thread: int) -> None:
    bench = Requests(lambda cores, threads: per_thread)
    main = torch.get_num_threads()
    bench.setup()
    try:
        sizes = set(bench.pool.map(lambda _: torch.get_num_threads(), range(8)))
        assert sizes == {per_thread}
        assert torch.get_num_threads() == main  # the calling thread's team is its own
    finally:
        bench.teardown()


@pytest.mark.slow  # three producer processes spawned, each importing torch
def test_ring_producer_failure_or_death_reaches_the_caller() -> None:
    """The producer process's error comes back as its text; a producer that dies ends the wait, with its exit
    code, instead of hanging the call."""
    bench = load_benchmark(CH03 / "optimized_ring_buffer.py")
    bench.setup()
    try:
        bench.conn.send((10**6, 0))  # a step the producer has no rows for
        with pytest.raises(RuntimeError, match="producer process failed: IndexError"):
            bench.filled()
    finally:
        bench.teardown()
    bench.setup()
    worker = bench.worker
    try:
        worker.kill()
        with pytest.raises(RuntimeError, match="producer process ended"):
            bench.benchmark_fn()
    finally:
        bench.teardown()
    assert not worker.is_alive()
    bench.setup()  # dead with an order unread: the pipe reads as closed (reset), not as a slot
    worker = bench.worker
    try:
        bench.order(0, 0)
        worker.kill()
        worker.join()
        with pytest.raises(RuntimeError, match="producer process ended"):
            bench.filled()
    finally:
        bench.teardown()


# the ring buffer's set-up again (10 s: its pinned slots and copy thread twice) in the full tier only
@pytest.mark.parametrize("variant", slow_for(VARIANTS, {"optimized_ring_buffer"}))
def test_set_up_again_after_teardown(setup_again: Callable[[Path], None], variant: str) -> None:
    setup_again(CH03 / f"{variant}.py")


def test_huge_pages_sides_get_their_page_size_and_the_same_rows() -> None:
    from bench.define.context import context
    from chapters.ch03.pages import thp_mode

    if thp_mode() in ("never", "absent"):
        pytest.skip(f"transparent huge pages are {thp_mode()} on this host")
    got = {}
    for side in ("baseline", "optimized"):
        bench = load_benchmark(CH03 / f"{side}_huge_pages.py")
        bench.setup()
        try:
            share = context().sizes["huge_page_share"]
            bench.benchmark_fn()
            got[side] = bench.get_output().clone()
            rows = bench.idx
            want = rows[:, None] * 16 + torch.arange(16)  # every value is its own index in the table
            assert torch.equal(got[side], want.to(torch.int32))
        finally:
            bench.teardown()
        if side == "baseline":
            assert share == 0.0  # huge pages refused, whatever the host's default
        else:
            assert share > 0.5  # smoke: 3 huge pages' worth; the kernel may not align the first and last
    assert torch.equal(got["baseline"], got["optimized"])
