"""sweeps/bottleneck.py on measured-shaped numbers: which part bounds the job, by how much, the remedies' gains."""

from __future__ import annotations

from sweeps.bottleneck import Bottleneck


def data_bound(**kw: object) -> Bottleneck:
    """Shaped like the issue's H200 job: per-sample HDF5 reads normalised on the host in float32."""
    fields = {"job_samples_per_s": 2_400.0, "workers": 8, "data": {0: 400.0, 2: 800.0, 4: 1_500.0, 8: 2_500.0},
              "step_samples_per_s": 10_000.0, "cores": 16, "gpu": True, "transfer_samples_per_s": 40_000.0,
              "input_dtype": "float32", "input_bytes_per_sample": 196_608.0, **kw}  # fmt: skip
    return Bottleneck(**fields)  # type: ignore[arg-type]


def test_a_data_bound_job_in_numbers() -> None:
    b = data_bound()
    assert b.data_bound and b.best_workers == 8 and b.data_samples_per_s == 2_500.0
    assert b.wait_pct == 76.0  # the step alone takes 10,000/s; the job ran 2,400/s
    assert b.headline() == ("the data path delivers at most 2,500 samples/s (with 8 workers); the step could take "
                            "10,000; the job ran 2,400: the GPU waits 76 %. Bound: the data path (the step could "
                            "run 4.00× faster).")  # fmt: skip
    more, gpu, uint8 = b.remedies()
    # 2,500 / 8 = 312.5 a worker x 16 cores = 5,000: an estimate, under the step's ceiling
    assert more == ("more workers, up to the 16 usable cores: ~5,000 samples/s if each kept its 312 samples/s "
                    "(an estimate from 8 workers), 2.08× the job")  # fmt: skip
    assert gpu.startswith("decode or normalise on the GPU: the host spends 2.50 ms a sample in one process")
    assert gpu.endswith("up to the step's 10,000 samples/s (4.17× the job)")
    assert uint8.startswith("uint8 transfer: the inputs travel as float32, 196,608 bytes a sample")
    assert "the copy alone runs 40,000 samples/s; up to 4.17× the job" in uint8
    assert b.numbers() == {"data_samples_per_s": 2500.0, "data_best_workers": 8.0, "step_samples_per_s": 10000.0,
                           "job_samples_per_s": 2400.0, "wait_pct": 76.0, "data_bound": 1.0,
                           "transfer_samples_per_s": 40000.0}  # fmt: skip
    md = b.markdown()
    assert "0: 400 | 2: 800 | 4: 1,500 | 8: 2,500" in md and "step alone (a batch kept on the device): 10,000" in md


def test_more_workers_are_capped_by_the_step_and_by_the_cores() -> None:
    many = data_bound(data={0: 400.0, 2: 3_000.0}, step_samples_per_s=6_000.0, job_samples_per_s=2_900.0)
    assert many.remedies()[0].startswith("more workers, up to the 16 usable cores: ~6,000 samples/s")  # not 24,000
    full = data_bound(cores=8)
    assert full.remedies()[0] == ("more workers: none to add — the probe reached all 8 usable cores, best with 8 "
                                  "(2,500 samples/s)")  # fmt: skip


def test_a_data_path_that_stops_scaling_points_at_the_file_layout() -> None:
    flat = data_bound(data={0: 400.0, 2: 800.0, 4: 900.0, 8: 950.0}, job_samples_per_s=900.0)
    layout = [r for r in flat.remedies() if r.startswith("a faster file layout")]
    assert layout and "0 workers 400, 2 workers 800, 4 workers 900, 8 workers 950" in layout[0]
    assert not [r for r in data_bound().remedies() if r.startswith("a faster file layout")]  # it scaled
    uint8_in = data_bound(input_dtype="uint8", input_bytes_per_sample=49_152.0)
    assert not [r for r in uint8_in.remedies() if r.startswith("uint8 transfer")]


def test_a_step_bound_job_says_so_and_its_headroom() -> None:
    b = data_bound(data={0: 5_000.0, 4: 30_000.0}, step_samples_per_s=9_000.0, job_samples_per_s=8_700.0)
    assert not b.data_bound and round(b.wait_pct, 1) == 3.3
    assert b.headline().endswith("Bound: the step (the data path has 3.33× headroom).")
    assert b.remedies() == ["the step bounds the job: mixed precision, channels_last, torch.compile or a larger batch "
                            "speed the step itself; the data path would keep up to 30,000 samples/s"]  # fmt: skip


def test_without_workers_loading_and_the_step_add_up_and_neither_alone_is_the_bound() -> None:
    """A user's job on 0 workers: data 162,637, step 93,108, the job 39,179 — "Bound: the step" beside "the step
    waits 58 %" said two things; in one process the two parts run in turn."""
    b = data_bound(data={0: 162_637.0, 2: 60_000.0}, step_samples_per_s=93_108.0, job_samples_per_s=39_179.0,
                   workers=0, gpu=False)  # fmt: skip
    head = b.headline()
    assert "the step waits 58 %" in head and "Bound: the step" not in head, head
    assert head.endswith("Bound: loading and the step in turn — with 0 workers the loader runs between steps, "
                         "together at most 59,211 samples/s; workers would overlap them, up to 93,108.")  # fmt: skip


def test_from_a_probe_report() -> None:
    probe = {"data_samples_per_s": {"0": 100.0, "2": 180.0}, "step_samples_per_s": 50.0, "cores": 2,
             "device": "cpu", "transfer_samples_per_s": None, "input_dtype": "float32",
             "input_bytes_per_sample": 3072.0}  # fmt: skip
    b = Bottleneck.from_probe(probe, 40.0, 0)
    assert b.data == {0: 100.0, 2: 180.0} and not b.gpu and not b.data_bound
    assert "the step waits 20 %" in b.headline()


def test_a_probe_below_the_jobs_own_rate_is_no_ceiling_and_names_no_bound() -> None:
    """The H200 jpeg job: the data path's probe read 8,283 with 16 workers, the job ran 10,821."""
    b = data_bound(data={0: 792.0, 2: 2_177.0, 4: 3_749.0, 8: 6_196.0, 16: 8_283.0}, step_samples_per_s=11_412.0,
                   job_samples_per_s=10_821.0, workers=16)  # fmt: skip
    assert b.data_below_job and not b.data_bound and not b.bound_named
    head = b.headline()
    assert "delivers at most" not in head and "Bound: the data path" not in head
    assert head.startswith("the data path's probe read 8,283 samples/s (with 16 workers), below the job's own rate")
    assert "the step could take 11,412; the job ran 10,821" in head
    assert "Bound: not named — the probe of the data path (8,283) is below the job's own rate (10,821)" in head
    assert b.remedies()[0].startswith("none weighed") and b.numbers()["bound_named"] == 0.0
    # within the runs' noise (3 %) a probe is still a ceiling
    close = data_bound(data={0: 400.0, 8: 2_450.0}, job_samples_per_s=2_500.0)
    assert close.data_bound and close.headline().endswith("Bound: the data path (the step could run 4.08× faster).")
    # the step's probe under the job: no step bound named either
    step = data_bound(data={0: 5_000.0, 4: 30_000.0}, step_samples_per_s=8_000.0, job_samples_per_s=8_700.0)
    assert not step.bound_named and "the step's probe read 8,000, below the job's own rate" in step.headline()
    assert "Bound: not named — the probe of the step (8,000)" in step.headline()


def test_fewer_workers_are_named_when_the_configurations_count_crowds_the_host() -> None:
    """An H200 host (16 cores) read 16 workers' data path at 6,898 samples/s and 8 workers' at 9,971."""
    crowded = data_bound(data={0: 1_769.0, 8: 9_971.0, 16: 6_898.0}, workers=16, cores=16,
                         step_samples_per_s=16_702.0, job_samples_per_s=6_520.0)  # fmt: skip
    assert crowded.remedies()[0] == (
        "fewer workers: 8 delivered 9,971 samples/s where the configuration's 16 delivered 6,898 (1.45×): beside "
        "the training process they oversubscribe the 16 usable cores; try num_workers=8 (up to 1.53× the job)"
    )
    close = data_bound(data={0: 1_769.0, 8: 7_200.0, 16: 6_898.0}, workers=16, cores=16)  # within 10 %: noise
    assert close.remedies()[0].startswith("more workers: none to add")


def test_a_probe_under_the_jobs_own_rate_is_taken_again_once() -> None:
    """sweeps.conclude: a part read under the job's own rate (CI's busy host: the step's probe 67 samples/s, the
    job 131) is probed once more and the second reading reported; a second reading under it stays unnamed."""
    from types import SimpleNamespace

    from sweeps.conclude import _bottleneck

    def report(step: float) -> SimpleNamespace:
        metrics = {"data_samples_per_s": {"0": 3_802.0, "2": 3_802.0}, "step_samples_per_s": step, "cores": 2,
                   "device": "cpu", "transfer_samples_per_s": None}  # fmt: skip
        return SimpleNamespace(status="ok", metrics=metrics, error=None)

    for readings, probes, named in (([67.0, 240.0], 2, True), ([67.0, 60.0], 2, False), ([240.0], 1, True)):
        left = list(readings)
        said: list[str] = []
        b = _bottleneck(lambda params, left=left: report(left.pop(0)), {"num_workers": 2}, 131.0, said.append, [])
        assert b is not None and b.bound_named is named and len(readings) - len(left) == probes
        assert b.step_samples_per_s == readings[probes - 1]  # the last reading is the one reported
        assert said[-1] == b.headline() and ("Probing again." in " ".join(said)) is (probes == 2)


def test_a_cpu_run_on_tensors_in_memory_gets_no_gpu_file_or_decode_advice() -> None:
    """The user probe's CPU job: a TensorDataset of floats, 2 cores, 2 workers slower than none. No GPU to move
    work to, no file, nothing decoded: the remedies say what the probe can tell (the loader's own work)."""
    b = data_bound(
        job_samples_per_s=41_812.0,
        workers=0,
        data={0: 85_914.0, 2: 18_275.0},
        step_samples_per_s=132_590.0,
        cores=2,
        gpu=False,
        transfer_samples_per_s=None,
        input_bytes_per_sample=64.0,
        data_in_memory=True,
    )
    said = b.remedies()
    assert not [r for r in said if r.startswith(("decode or normalise on the GPU", "uint8 transfer", "a faster file"))]
    assert any(r.startswith("the data are tensors in memory (a TensorDataset): no file to read") for r in said)
    on_files = data_bound(job_samples_per_s=41_812.0, workers=0, data={0: 85_914.0, 2: 18_275.0}, cores=2, gpu=False)
    assert not [r for r in on_files.remedies() if r.startswith("a faster file")]  # workers only slowed it: not reads
    assert not [r for r in on_files.remedies() if "GPU" in r]


def test_the_probe_tells_tensors_in_memory_from_a_dataset_of_its_own() -> None:
    from types import SimpleNamespace

    import torch
    from torch.utils.data import TensorDataset

    from sweeps.probe import _in_memory

    tensors = TensorDataset(torch.zeros(4, 2), torch.zeros(4))
    assert _in_memory(SimpleNamespace(wl=SimpleNamespace(loader=None, collate_fn=None, dataset=tensors)))
    assert not _in_memory(SimpleNamespace(wl=SimpleNamespace(loader=None, collate_fn=list, dataset=tensors)))
    assert not _in_memory(SimpleNamespace(wl=SimpleNamespace(loader=None, collate_fn=None, dataset=[(1, 2)] * 4)))
    assert not _in_memory(SimpleNamespace(wl=SimpleNamespace(loader=lambda: [], collate_fn=None, dataset=None)))
