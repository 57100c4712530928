"""The probe's data path rate against a known one: items that sleep ``ITEM_S`` each, so W workers deliver
W / ITEM_S samples/s. Epochs as short as the H200 job's relative to its workers (6,000 / 128 = 47 batches,
16 workers: under three waves an epoch; here 11 batches for 4 workers, 5 for 2): the probe's window spans
several epoch boundaries."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import pytest

from sweeps import probe
from sweeps.api import TrialSettings
from sweeps.measure import Trainer, TrialJob
from sweeps.workload import parse_workload

JOB = str(Path(__file__).parent / "fixtures" / "sleepy.py") + ":make"
ITEM_S = 0.02
BATCH = 4


def trainer(items: int) -> Trainer:
    s = TrialSettings(batch_size=BATCH, num_workers=8, pin_memory=False, amp=False, device="cpu",
                      args={"item_s": ITEM_S, "items": items})  # fmt: skip
    return Trainer(TrialJob(workload=asdict(parse_workload(JOB)), settings=asdict(s)))


def _slept(seconds: float, n: int = 10) -> float:
    """What a sleep of ``seconds`` takes on this host now: a loaded host wakes a sleeper late (CI's busy 2-core host
    read 41-43 samples/s of the 50 that one process's 0.02-s items make), and the probe's items sleep as long."""
    t0 = time.perf_counter()
    for _ in range(n):
        time.sleep(seconds)
    return (time.perf_counter() - t0) / n


@pytest.mark.parametrize(("workers", "items"), [(4, 11 * BATCH), (2, 5 * BATCH), (0, 10 * BATCH)])
def test_the_data_rate_reaches_the_known_rate_across_short_epochs(workers: int, items: int) -> None:
    true = max(workers, 1) / _slept(ITEM_S)  # samples/s: each worker sleeps ITEM_S an item, as this host sleeps it
    # a ceiling must not read under the true rate; above it only by the noise of a loaded host's timers. Sleeping
    # workers woken late on crowded cores deliver less than the true rate for a while: up to three readings, the
    # best must reach it (a probe that loses a wave at each epoch boundary reads low every time)
    rates = []
    while len(rates) < 3 and (not rates or rates[-1] < 0.9 * true):
        rates.append(probe._data_rate(trainer(items), workers, 1.0))
    assert 0.9 * true <= max(rates) and all(r <= 1.3 * true for r in rates), (workers, rates, true)


def test_a_trial_drains_what_its_workers_queued_before_it_times() -> None:
    """During a slow first step (a GPU's: cuDNN, the allocator) the workers queue num_workers x prefetch_factor
    batches; steps timed while that queue drains read the step's rate, not the data path's (the H200 JPEG job: 16
    workers x 2 = 32 batches queued, 3 + 20 steps: its trial read above its data path). The warm-up covers them."""
    from types import SimpleNamespace

    from sweeps.measure import _Steps

    def warmup(workers: int, prefetch: int = 2, accum: int = 1, job_warmup: int = 3) -> int:
        s = SimpleNamespace(num_workers=workers, prefetch_factor=prefetch, grad_accum=accum)
        return _Steps(SimpleNamespace(s=s), SimpleNamespace(warmup_steps=job_warmup)).warmup_steps()

    assert warmup(0) == 3 and warmup(1) == 3  # nothing (or 2 batches) queued: the job's own warm-up
    assert warmup(16) == 33 and warmup(8, prefetch=4) == 33  # one step, then the 32 queued batches
    assert warmup(16, accum=4) == 9 and warmup(2, job_warmup=10) == 10


def test_epochs_under_two_waves_count_whole_and_end_in_time() -> None:
    import time

    t0 = time.perf_counter()
    rate = probe._data_rate(trainer(3 * BATCH), 4, 0.5)  # 3 batches an epoch, 4 workers: no whole wave inside
    assert 0 < rate <= 1.3 * 4 / ITEM_S and time.perf_counter() - t0 < 15


def test_a_cpu_trial_runs_no_more_threads_than_the_free_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a core kept busy by another process a CPU step's second intra-op thread waits for it a scheduler
    slice per op (the tests' ResNet step: 6 samples/s instead of 1,194 on the 2-core host): a trial and the probe
    (both build a Trainer) cap the threads at the free cores, and the trial's report says so."""
    import torch

    from bench.measure import cores
    from sweeps.measure import measure

    before = torch.get_num_threads()
    monkeypatch.setattr(cores, "free_cores", lambda *a, **k: (1, 2, 1.0))  # one core of two busy
    try:
        torch.set_num_threads(2)
        job = trainer(10 * BATCH)
        assert job.threads == 1 == torch.get_num_threads() and "capped at 1" in (job.threads_note or "")
        torch.set_num_threads(2)
        s = TrialSettings(batch_size=BATCH, num_workers=0, pin_memory=False, amp=False, device="cpu",
                          args={"item_s": 0.0, "items": 10 * BATCH})  # fmt: skip
        report = measure(TrialJob(workload=asdict(parse_workload(JOB)), settings=asdict(s), warmup_steps=1, steps=2))
        assert report["cpu_threads"] == 1 and "1.0 of the host's cores busy" in report["threads_note"]
        monkeypatch.setattr(cores, "free_cores", lambda *a, **k: (2, 2, 0.1))  # a quiet host: nothing capped
        torch.set_num_threads(2)
        quiet = trainer(10 * BATCH)
        assert quiet.threads == 2 and quiet.threads_note is None
    finally:
        torch.set_num_threads(before)
