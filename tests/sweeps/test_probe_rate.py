"""The probe's data path rate against a known one: items that sleep ``ITEM_S`` each, so W workers deliver
W / ITEM_S samples/s. Epochs as short as the H200 job's relative to its workers (6,000 / 128 = 47 batches,
16 workers: under three waves an epoch; here 11 batches for 4 workers, 5 for 2), so the probe's window spans several epoch boundaries."""

from __future__ import annotations

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


@pytest.mark.parametrize(("workers", "items"), [(4, 11 * BATCH), (2, 5 * BATCH), (0, 10 * BATCH)])
def test_the_data_rate_reaches_the_known_rate_across_short_epochs(workers: int, items: int) -> None:
    true = max(workers, 1) / ITEM_S  # samples/s: each worker sleeps ITEM_S an item
    rate = probe._data_rate(trainer(items), workers, 1.0)
    # a ceiling must not read under the true rate; above it only by the noise of a loaded host's timers
    assert 0.9 * true <= rate <= 1.3 * true, (workers, rate, true)


@pytest.mark.xfail(strict=False, reason="(timing: not strict on a loaded host) a trial's steps drain the batches its workers prefetched during a slow "
                   "warm-up (workers x prefetch_factor >= warm-up + measured steps): its rate reads above the data "
                   "path's; sweeps.measure is not changed here")  # fmt: skip
def test_a_trial_of_a_data_bound_job_reads_no_faster_than_its_data_path() -> None:
    """8 workers x prefetch 2 = 16 batches ready after a first step of 1 s (a GPU's first step: cuDNN, the
    allocator), 3 + 20 steps: the trial read ~2x (0.4 s first step, 8,000 items, /tmp/exp2.py in the report) the data path's 400 samples/s on this host (~1x with 100 steps).
    The H200 jpeg job: 16 workers x 2 = 32 batches >= 23 steps."""
    from sweeps.measure import measure

    s = TrialSettings(batch_size=8, num_workers=8, pin_memory=False, amp=False, device="cpu",
                      args={"item_s": ITEM_S, "items": 4000, "first_step_s": 1.0})  # fmt: skip
    out = measure(TrialJob(workload=asdict(parse_workload(JOB)), settings=asdict(s), steps=20, warmup_steps=3))
    assert out["samples_per_s"] <= 1.1 * 8 / ITEM_S


def test_epochs_under_two_waves_count_whole_and_end_in_time() -> None:
    import time

    t0 = time.perf_counter()
    rate = probe._data_rate(trainer(3 * BATCH), 4, 0.5)  # 3 batches an epoch, 4 workers: no whole wave inside
    assert 0 < rate <= 1.3 * 4 / ITEM_S and time.perf_counter() - t0 < 15
