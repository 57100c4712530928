"""A CPU pair's rounds at different intra-op thread caps (bench/isolate/rounds.py, bench/isolate/merged.py,
bench/measure/cores.py): the free cores at each round's start differ on a busy host. Both sides of a round share its
cap; each variant's timing lists every round's count (``Timing.threads``) and says in its notes where they differ;
kept children hold round 0's cap, and so does every later round of theirs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.define.config import resolve_config
from bench.define.discovery import discover, select
from bench.define.result import Timing, VariantResult
from bench.isolate import rounds as rounds_module
from bench.isolate.merged import merge, mixed_threads_note
from bench.isolate.rounds import Rounds
from bench.isolate.suite import run_suite
from bench.measure.stats import summarize

FAST = {"warmup": 1, "iterations": 5, "min_warmup_seconds": 0.0, "device": "cpu", "busy_rounds": "keep"}


def readings(monkeypatch: pytest.MonkeyPatch, free: list[int]) -> list[bool]:
    """The free cores each reading gives in turn (of 2 usable); the list of readings taken (their ``fresh``)."""
    taken: list[bool] = []

    def free_cores(window_s: float = 0.1, fresh: bool = True) -> tuple[int, int, float]:
        n = free[min(len(taken), len(free) - 1)]
        taken.append(fresh)
        return n, 2, 2.0 - n

    monkeypatch.setattr(rounds_module, "free_cores", free_cores)
    return taken


def _result(spec: Any, threads: int, **config: Any) -> VariantResult:
    samples = [1.0, 1.01, 0.99]
    timing = Timing(mode="cpu", method="t", samples_ms=samples, stats=summarize(samples), threads=[threads])
    return VariantResult(spec=spec, status="ok", timing=timing, device="cpu",
                         config={"min_rounds": 3, "max_rounds": 3, **config})  # fmt: skip


def _pair(tmp_path: Path, write_benchmark: Any) -> Rounds:
    root = tmp_path / "chapters"
    for name in ("baseline_a", "optimized_a"):
        write_benchmark(root / "ch07" / f"{name}.py")
    (example,) = select(discover(root))
    return Rounds(example, resolve_config({"device": "cpu"}))


def test_a_rounds_sides_share_its_cap_and_kept_rounds_keep_round_0s(tmp_path, write_benchmark, monkeypatch) -> None:
    """Fresh children: each round reads the free cores once and gives both sides that cap (1, none, 1). Kept
    children hold round 0's cap: a later round reads nothing and gives round 0's cap to any fresh child in it (one
    standing in for a kept child that is gone), where it gave that round's own reading, 1 thread beside a kept side
    of 2."""
    fresh = _pair(tmp_path / "fresh", write_benchmark)
    taken = readings(monkeypatch, [1, 2, 1])
    caps = []
    for _ in range(3):
        specs = fresh.start()
        jobs = [fresh.job(s) for s in specs]
        assert all(j.get("threads") == jobs[0].get("threads") for j in jobs), jobs
        caps.append(jobs[0].get("threads"))
        for s in specs:
            fresh.add(s, _result(s, jobs[0].get("threads") or 2))
    assert caps == [1, None, 1] and len(taken) == 3

    kept = _pair(tmp_path / "kept", write_benchmark)
    taken = readings(monkeypatch, [2, 1, 1])
    specs = kept.start()
    assert all("threads" not in kept.job(s) for s in specs)  # round 0: both cores free, no cap
    for s in specs:
        kept.kept[s.key] = SimpleNamespace(alive=True, total_mb=None, held_mb=0.0)  # type: ignore[assignment]
        kept.add(s, _result(s, 2, round_children="kept"))
    assert kept.release() == [] and kept.keeping
    kept.kept[specs[1].key].alive = False  # gone: its side's next round takes a fresh child
    for s in kept.start():
        assert "threads" not in kept.job(s), kept.job(s)
    assert kept.resume(specs[0]) is not None and kept.resume(specs[1]) is None
    assert len(taken) == 1  # only round 0 read the free cores


def test_merged_rounds_list_each_rounds_threads_and_say_when_they_differ() -> None:
    from bench.define.result import VariantSpec

    spec = VariantSpec(chapter="ch07", example="a", variant="baseline", path="/x/baseline_a.py")
    mixed = merge([_result(spec, n) for n in (1, 2, 1)]).timing
    assert mixed is not None and mixed.threads == [1, 2, 1] and mixed.rounds == [3, 3, 3]
    assert mixed_threads_note([1, 2, 1]) in mixed.notes
    assert mixed.notes[-1].startswith("rounds ran at different intra-op thread counts (1, 2, 1, round by round")
    same = merge([_result(spec, 2) for _ in range(3)]).timing
    assert same is not None and same.threads == [2, 2, 2] and not same.notes
    calm = merge([_result(spec, n) for n in (1, 2, 2)], [1, 2]).timing  # the rounds a pair's speedup kept
    assert calm is not None and calm.threads == [2, 2] and not calm.notes


def test_a_pair_whose_rounds_ran_at_different_caps_says_so(tmp_path, write_benchmark, monkeypatch) -> None:
    """Three rounds of fresh children at 1, 2 and 1 free cores: each round's children ran at its count, both sides
    alike, and each side's pooled timing lists the counts and says they differ."""
    import torch

    threads = torch.get_num_threads()
    if threads < 2:
        pytest.skip("torch runs one intra-op thread here: nothing to cap")
    readings(monkeypatch, [1, 2, 1])
    root = tmp_path / "chapters"
    for name in ("baseline_a", "optimized_a"):
        write_benchmark(root / "ch07" / f"{name}.py")
    layer = {**FAST, "min_rounds": 3, "max_rounds": 3, "round_children": "fresh"}
    suite = run_suite(select(discover(root)), cli_layer=layer)
    base, opt = suite.variants
    for v in (base, opt):
        assert v.status == "ok" and v.timing is not None, v.error
        assert v.timing.threads == [1, threads, 1] and v.timing.rounds == [5, 5, 5]
        assert mixed_threads_note([1, threads, 1]) in v.timing.notes
    (c,) = suite.comparisons
    assert len(c.round_speedups) == 3
