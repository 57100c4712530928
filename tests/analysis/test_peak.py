"""analysis/peak.py and ``perflab peak`` on the CPU: positive ceilings, cached per hardware, reused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analysis import peak as peak_mod
from bench.errors import PerflabError
from bench.measure import ceilings as peaks
from perflab import cli
from tests.analysis.synthetic import Store

SMALL = {"copy_bytes": 8 * 2**20, "matmul_n": 256, "repeats": 3}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache" / "peaks.json"
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(path))
    return path


def test_cpu_peak_is_measured_logged_and_cached(cache: Path, store: Store) -> None:
    store.experiment("peak")
    entry, reused = peak_mod.peak(device="cpu", experiment="peak", tracking_uri=store.uri, **SMALL)
    assert not reused
    assert entry["key"] == peaks.cpu_key() and entry["device"] == "cpu"
    assert entry["ceilings"]["copy_gbps"] > 0 and entry["ceilings"]["fp32_tflops"] > 0
    on_disk = json.loads(cache.read_text())
    assert list(on_disk) == [peaks.cpu_key()]
    assert on_disk[peaks.cpu_key()]["ceilings"] == entry["ceilings"]
    assert peaks.lookup(peaks.cpu_key()) == entry["ceilings"]
    run = store.client.get_run(entry["run_id"])
    assert run.data.tags["perflab.kind"] == "peak" and run.data.tags["perflab.hardware"] == entry["key"]
    assert run.data.metrics["copy_gbps"] == pytest.approx(entry["ceilings"]["copy_gbps"])


def test_cached_entry_is_reused_unless_forced(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = peak_mod.peak(device="cpu", track=False, **SMALL)

    def refuse(**_: object) -> None:
        raise AssertionError("measured although the cache had this device")

    monkeypatch.setattr(peak_mod, "measure_cpu", refuse)
    again, reused = peak_mod.peak(device="cpu", track=False, **SMALL)
    assert reused and again == first
    with pytest.raises(AssertionError, match="measured although"):
        peak_mod.peak(device="cpu", track=False, force=True, **SMALL)


def test_store_keeps_other_hardware(cache: Path) -> None:
    peak_mod.store({"key": "NVIDIA H100 80GB HBM3", "ceilings": {"copy_gbps": 2996.0}})
    peak_mod.store({"key": "other", "ceilings": {"copy_gbps": 1.0}})
    assert set(peaks.load_cache()) == {"NVIDIA H100 80GB HBM3", "other"}


def test_cli_reports_reuse(cache: Path) -> None:
    peak_mod.store({"key": peaks.cpu_key(), "device": "cpu", "measured_at": "2026-11-21T00:00:00+00:00",
                    "torch": "x", "ceilings": {"copy_gbps": 10.0, "fp32_tflops": 0.05}, "notes": {}})  # fmt: skip
    res = CliRunner().invoke(cli.app, ["peak", "--device", "cpu", "--no-track"])
    assert res.exit_code == 0, res.output
    assert "reused the cached ceilings" in res.output and "50.0 GFLOP/s" in res.output


@pytest.mark.parametrize(
    ("device", "says"), [("tpu", "'tpu' unknown; accepted: auto"), ("cuda:1", "'cuda:1' unknown; accepted: auto")]
)
def test_a_device_peak_cannot_measure_is_one_line(cache: Path, monkeypatch: pytest.MonkeyPatch, device: str,
                                                  says: str) -> None:  # fmt: skip
    monkeypatch.setattr(peak_mod, "measure_cpu", lambda **_: pytest.fail("measured the CPU for another device"))
    res = CliRunner().invoke(cli.app, ["peak", "--device", device, "--no-track"])
    assert isinstance(res.exception, PerflabError) and says in str(res.exception)  # perflab's one-line error


def test_cuda_on_a_host_without_a_gpu_is_one_line(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = CliRunner().invoke(cli.app, ["peak", "--device", "cuda", "--no-track"])
    assert isinstance(res.exception, PerflabError)
    assert "torch sees no CUDA GPU on this host; accepted here: auto, cpu" in str(res.exception)


@pytest.mark.parametrize("where", ["under_a_file", "a_directory"])
def test_a_cache_that_cannot_be_written_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from bench.errors import PerflabError

    (tmp_path / "a_file").write_text("")
    path = tmp_path / "a_file" / "peaks.json" if where == "under_a_file" else tmp_path
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(path))

    def refuse(**_: object) -> None:
        raise AssertionError("measured with nowhere to keep the ceilings")

    monkeypatch.setattr(peak_mod, "measure_cpu", refuse)
    with pytest.raises(PerflabError, match=rf"^peak cache '{path}': cannot be written .*set PERFLAB_PEAK_CACHE"):
        peak_mod.peak(device="cpu", track=False, **SMALL)


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


@pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs: the link between them (the H200 x 2 host)")
def test_the_link_between_two_gpus_is_measured_both_ways_at_once() -> None:
    """p2p_gbps: bytes per direction, a rate a GPU link has (NVLink 4: 450 GB/s a direction; PCIe 5: 64)."""
    one = peak_mod._peer_gbps(64 * 2**20, 5, 3)
    assert 5.0 < one < 1000.0
    ceilings, notes = peak_mod.measure_gpu(matmul_n=1024, repeats=3)
    assert ceilings["p2p_gbps"] > 5.0 and "both ways at once" in notes["p2p_gbps"]


@pytest.mark.skipif(_gpus() != 1, reason="needs exactly one GPU (the link is measured where two are visible)")
def test_one_gpu_says_why_it_has_no_link() -> None:
    ceilings, notes = peak_mod.measure_gpu(matmul_n=1024, repeats=3)
    assert "p2p_gbps" not in ceilings and notes["p2p_gbps"] == "not measured: needs 2 GPUs (1 visible)"
