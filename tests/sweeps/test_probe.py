"""sweeps/probe.py in a trial process on the user's job: the data path alone per worker count, the step alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps.bottleneck import Bottleneck
from sweeps.config import SweepConfig
from sweeps.runner import job_for
from sweeps.trial import run_trial
from sweeps.workload import parse_workload
from tests.sweeps.fixtures.h5_classifier import write

JOB = str(Path(__file__).parent / "fixtures" / "h5_classifier.py") + ":make"
LATENCY_S = 0.02  # each sample's read sleeps this long: one process delivers at most 50 samples/s


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("job") / "images.h5")
    write(path, samples=64, side=16)
    return path


def test_the_probe_times_the_data_path_per_worker_count_and_the_step_alone(images: str) -> None:
    cfg = SweepConfig(workload=JOB, workload_args={"storage_latency_s": LATENCY_S}, warmup_steps=1)
    params = {"batch_size": 4, "num_workers": 0, "amp": False, "pin_memory": False, "grad_accum": 1,
              "channels_last": False, "compile": False, "prefetch_factor": 2, "persistent_workers": True}  # fmt: skip
    job = job_for(cfg, parse_workload(JOB), images, cuda=False, smoke=True, params=params, mode="probe",
                  probe_workers=(2,), probe_seconds=0.5)  # fmt: skip
    out = run_trial(job, 120)
    assert out.status == "ok", out.error
    p = out.metrics
    data = {int(w): v for w, v in p["data_samples_per_s"].items()}
    assert sorted(data) == [0, 2]  # 0 always, and the workers asked for
    assert 0 < data[0] <= 1 / LATENCY_S  # the reads' latency bounds one process
    assert data[2] > 1.4 * data[0]  # two workers wait on their reads side by side
    assert p["step_samples_per_s"] > 0 and p["transfer_samples_per_s"] is None  # no copy to time on the CPU
    assert p["input_dtype"] == "float32" and p["input_bytes_per_sample"] == 3 * 16 * 16 * 4  # normalised on the host
    b = Bottleneck.from_probe(p, job_samples_per_s=data[0] * 0.9, workers=0)
    assert b.best_workers == 2 and f"{data[2]:,.0f} samples/s (with 2 workers)" in b.headline()
