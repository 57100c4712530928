"""bench/measure/ceilings.py: pct_of_peak from a synthetic peak cache, and tracking logging it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from bench.define.result import OutputInfo, TensorInfo, Work
from bench.measure import ceilings as peaks
from bench.measure import judge
from bench.record.tracking import Tracker
from tests.analysis.synthetic import H100, result

CEILINGS = {"copy_gbps": 3000.0, "l2_gbps": 9000.0, "fp32_tflops": 50.0, "bf16_tflops": 750.0}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({H100: {"key": H100, "ceilings": CEILINGS, "notes": {}}}))
    monkeypatch.setenv("PERFLAB_PEAK_CACHE", str(path))
    return path


def test_memory_bound_is_judged_against_copy_bandwidth() -> None:
    pct, name = peaks.pct_of_peak(1500.0, None, CEILINGS) or (None, None)
    assert (pct, name) == (pytest.approx(50.0), "copy_gbps")


def test_ridge_point_decides_between_memory_and_compute() -> None:
    # bf16 ridge = 750e12 / 3000e9 = 250 FLOP/byte.
    low = peaks.pct_of_peak(2000.0, 2000.0 * 10 / 1e3, CEILINGS, "bf16")  # 10 FLOP/byte: memory-bound
    high = peaks.pct_of_peak(1000.0, 600.0, CEILINGS, "bf16")  # 600 FLOP/byte: compute-bound
    assert low is not None and low[1] == "copy_gbps" and low[0] == pytest.approx(2000 / 3000 * 100)
    assert high is not None and high[1] == "bf16_tflops" and high[0] == pytest.approx(80.0)
    # the same work judged as fp32: ridge 16.7 FLOP/byte, 10 FLOP/byte is still memory-bound
    assert peaks.pct_of_peak(2000.0, 20.0, CEILINGS, "fp32")[1] == "copy_gbps"  # type: ignore[index]


def test_no_matching_ceiling_gives_nothing() -> None:
    assert peaks.pct_of_peak(None, 5.0, CEILINGS, "fp8") is None
    assert peaks.pct_of_peak(100.0, None, {"fp32_tflops": 1.0}) is None


def test_peak_metrics_from_the_cache(cache: Path) -> None:
    r = result("ch07:x:optimized", [0.1] * 20, work_bytes=150e6)  # 150 MB / 0.1 ms = 1500 GB/s
    assert peaks.peak_metrics(r) == {"pct_of_peak": pytest.approx(50.0)}
    other = result("ch07:x:optimized", [0.1] * 20, gpu="NVIDIA A100-SXM4-80GB", work_bytes=150e6)
    assert peaks.peak_metrics(other) == {}  # no ceilings for that hardware: nothing invented
    assert peaks.peak_metrics(result("ch07:x:optimized", [0.1] * 20)) == {}  # no work declared


def test_flop_bound_result_uses_its_output_dtype(cache: Path) -> None:
    r = result("ch09:mm:optimized", [1.0] * 20, work_bytes=1e8, work_flops=6e11)  # 600 TFLOP/s, 6000 FLOP/B
    r = r.model_copy(
        update={
            "output": OutputInfo(path=None, tensors=[TensorInfo(shape=[1], dtype="torch.bfloat16", device="cuda:0")])
        }
    )
    assert peaks.peak_metrics(r)["pct_of_peak"] == pytest.approx(80.0)
    assert peaks.binding_ceiling(r) == (pytest.approx(80.0), "bf16_tflops")  # the dtype's ceiling, by name


def test_a_variant_of_several_gpus_is_held_to_their_summed_ceilings(cache: Path) -> None:
    # 1200 TFLOP/s of bf16 work: impossible on one H100 (750), 80 % of two
    r = result("ch04:tp:optimized", [1.0] * 20, work_bytes=1e8, work_flops=1.2e12)
    r = r.model_copy(update={
        "config": {**r.config, "world_size": 2},
        "output": OutputInfo(path=None, tensors=[TensorInfo(shape=[1], dtype="bfloat16", device="cuda:0")]),
    })  # fmt: skip
    assert peaks.binding_ceiling(r) == (pytest.approx(80.0), "bf16_tflops")
    assert judge._faster_than_hardware(r) is None
    one = r.model_copy(update={"config": {**r.config, "world_size": 1}})
    assert "faster than the hardware" in (judge._faster_than_hardware(one) or "")
    three = r.model_copy(update={"config": {**r.config, "world_size": 2}, "work": Work(flops=2.0e12)})
    assert "of 2 GPUs" in (judge._faster_than_hardware(three) or "")


def test_collective_work_gives_algorithm_and_bus_bandwidth() -> None:
    r = result("ch04:allreduce:optimized", [2.0] * 20)  # 2 ms per call
    r = r.model_copy(update={"work": Work(comm_bytes=1e9, bus_factor=1.5)})
    assert r.derived_metrics() == {"algbw_gbps": pytest.approx(500.0), "busbw_gbps": pytest.approx(750.0)}


def test_a_collective_is_held_to_the_measured_link_once_whatever_its_ranks(cache: Path) -> None:
    """busbw (each rank's link rate) against p2p_gbps, not n times it; no link measured: no percent."""
    r = result("ch04:allreduce:optimized", [2.0] * 20)  # 750 GB/s busbw, as above
    r = r.model_copy(update={"work": Work(comm_bytes=1e9, bus_factor=1.5), "config": {**r.config, "world_size": 2}})
    assert peaks.binding_ceiling(r) is None  # the cache has no link: nothing invented from copy_gbps
    data = json.loads(cache.read_text())
    data[H100]["ceilings"]["p2p_gbps"] = 1000.0
    cache.write_text(json.dumps(data))
    assert peaks.binding_ceiling(r) == (pytest.approx(75.0), "p2p_gbps")
    assert peaks.binding_ceiling(r.model_copy(update={"config": {**r.config, "world_size": 4}})) == (
        pytest.approx(75.0), "p2p_gbps")  # fmt: skip
    # a collective beside FLOPs (DDP) stays on the roofline: its FLOPs bind, not its busbw
    ddp = r.model_copy(update={"work": Work(comm_bytes=1e9, bus_factor=1.5, flops=1.2e12, dtype="bf16")})
    assert peaks.binding_ceiling(ddp) == (pytest.approx(40.0), "bf16_tflops")  # 600 of 2 x 750 TFLOP/s


def test_work_that_names_its_precision_is_judged_against_that_peak(cache: Path) -> None:
    """fp32 losses of a bf16-autocast step: the declared work's dtype picks the matmul peak, not the output."""
    from bench.define.result import Work

    r = result("ch13:amp:optimized", [1.0] * 20, work_bytes=1e8, work_flops=6e11)  # 600 TFLOP/s
    fp32_out = OutputInfo(path=None, tensors=[TensorInfo(shape=[2], dtype="torch.float32", device="cuda:0")])
    r = r.model_copy(update={"output": fp32_out})
    assert peaks.binding_ceiling(r) == (pytest.approx(1200.0), "fp32_tflops")  # the losses' dtype: absurd
    r = r.model_copy(update={"work": Work(bytes=1e8, flops=6e11, dtype="bf16")})
    assert peaks.binding_ceiling(r) == (pytest.approx(80.0), "bf16_tflops")


def test_slug_and_hardware_key() -> None:
    assert peaks.slug(H100) == "nvidia-h100-80gb-hbm3"
    assert peaks.hardware_key(result("a:b:baseline", [1.0])) == H100
    assert peaks.hardware_key(result("a:b:baseline", [1.0], gpu=None)) == peaks.cpu_key()


def test_tracking_logs_pct_of_peak_and_hardware(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    client.create_experiment("peaks", artifact_location=(tmp_path / "art").as_uri())
    r = result("ch07:x:baseline", [0.1] * 20, work_bytes=150e6)
    with Tracker(experiment="peaks", tracking_uri=uri, host_manifest={}) as t:
        run_id = t.log_variant(r)
    run = client.get_run(run_id)
    assert run.data.metrics["pct_of_peak"] == pytest.approx(50.0)
    assert run.data.tags["perflab.peak_ceiling"] == "copy_gbps"  # which ceiling the percent is of
    assert run.data.tags["perflab.hardware"] == H100
