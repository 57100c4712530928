"""bench/profile/tools.py, bench/profile/verdict.py, bench/profile/markers.py: profiling in its own child, ncu parsing, verdicts."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from typer.testing import CliRunner

import bench
from bench.audit.truth import parse_ncu_csv as selfcheck_parse
from bench.define.discovery import discover, select
from bench.define.result import Profile, Timing, VariantResult, VariantSpec, Work
from bench.isolate.profiled import profile_variant
from bench.isolate.suite import run_suite
from bench.measure.stats import summarize
from bench.profile import markers
from bench.profile.tools import NCU_METRICS, aggregate_ncu, ncu_command, parse_ncu_csv
from bench.profile.verdict import Roofline, verdict, verdict_for
from bench.record.tracking import Tracker
from perflab.cli import app

CPU = {"device": "cpu", "iterations": 5, "warmup": 1, "min_rounds": 1, "max_rounds": 1}

# HAND-MADE in Nsight Compute's `--csv` details-page format (same columns, quoting, units and
# "==PROF==" preamble as ncu 2025.x prints); not captured on a GPU (real H100 output:
# tests/bench/profile/data/ncu_h100). Three kernels, the five metrics of the minimal preset each, mixed
# time units, a thousands separator and an "n/a" value.
NCU_CSV = """==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "ampere_sgemm_128x64_nn" - 0: 0%....50%....100% - 3 passes
==PROF== Profiling "vectorized_elementwise_kernel" - 1: 0%....50%....100% - 3 passes
==PROF== Profiling "reduce_kernel" - 2: 0%....50%....100% - 3 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","ampere_sgemm_128x64_nn","1","7","(128, 1, 1)","(64, 32, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","30.00"
"0","4242","python3.12","127.0.0.1","ampere_sgemm_128x64_nn","1","7","(128, 1, 1)","(64, 32, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","200.00"
"0","4242","python3.12","127.0.0.1","ampere_sgemm_128x64_nn","1","7","(128, 1, 1)","(64, 32, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","70.00"
"0","4242","python3.12","127.0.0.1","ampere_sgemm_128x64_nn","1","7","(128, 1, 1)","(64, 32, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","90.00"
"0","4242","python3.12","127.0.0.1","ampere_sgemm_128x64_nn","1","7","(128, 1, 1)","(64, 32, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","45.00"
"1","4242","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int, T1, T2)","1","7","(128, 1, 1)","(131072, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","90.00"
"1","4242","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int, T1, T2)","1","7","(128, 1, 1)","(131072, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","50,000"
"1","4242","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int, T1, T2)","1","7","(128, 1, 1)","(131072, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","40.00"
"1","4242","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int, T1, T2)","1","7","(128, 1, 1)","(131072, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","20.00"
"1","4242","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int, T1, T2)","1","7","(128, 1, 1)","(131072, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","80.00"
"2","4242","python3.12","127.0.0.1","void at::native::reduce_kernel<512, 1>(T1)","1","7","(512, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","5.00"
"2","4242","python3.12","127.0.0.1","void at::native::reduce_kernel<512, 1>(T1)","1","7","(512, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","0.0025"
"2","4242","python3.12","127.0.0.1","void at::native::reduce_kernel<512, 1>(T1)","1","7","(512, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","10.00"
"2","4242","python3.12","127.0.0.1","void at::native::reduce_kernel<512, 1>(T1)","1","7","(512, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","3.00"
"2","4242","python3.12","127.0.0.1","void at::native::reduce_kernel<512, 1>(T1)","1","7","(512, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","n/a"
"""


# ------------------------------------------------------------------------------- ncu CSV → metrics


def test_ncu_csv_parsed_per_kernel_with_units() -> None:
    kernels = parse_ncu_csv(NCU_CSV)
    assert [k.id for k in kernels] == ["0", "1", "2"]
    assert kernels[1].name.startswith("void at::native::vectorized_elementwise_kernel")
    assert [k.time_us for k in kernels] == pytest.approx([200.0, 50.0, 2.5])  # usecond, "50,000" ns, ms
    assert set(kernels[0].metrics) == set(NCU_METRICS)
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" not in kernels[2].metrics  # "n/a" dropped
    assert parse_ncu_csv("==PROF== no kernels were profiled") == []
    # selfcheck reads the same parser (milliseconds per kernel)
    assert selfcheck_parse(NCU_CSV) == pytest.approx([0.2, 0.05, 0.0025])


def test_ncu_aggregation_is_weighted_by_kernel_time() -> None:
    m = aggregate_ncu(parse_ncu_csv(NCU_CSV), calls=1)
    total = 252.5
    assert m["ncu_gpu_time_us"] == pytest.approx(total)
    assert m["ncu_kernel_count"] == 3
    assert m["ncu_dram_throughput_pct"] == pytest.approx((30 * 200 + 90 * 50 + 5 * 2.5) / total)
    assert m["ncu_sm_throughput_pct"] == pytest.approx((90 * 200 + 20 * 50 + 3 * 2.5) / total)
    assert m["ncu_l2_hit_rate_pct"] == pytest.approx((70 * 200 + 40 * 50 + 10 * 2.5) / total)
    # the kernel without an occupancy value leaves the weights of that metric only
    assert m["ncu_achieved_occupancy_pct"] == pytest.approx((45 * 200 + 80 * 50) / 250)
    # the 200 us gemm dominates: an unweighted mean would put SM throughput at 38 %, weighted it is 75 %
    assert m["ncu_sm_throughput_pct"] > 1.5 * sum([90, 20, 3]) / 3
    assert aggregate_ncu(parse_ncu_csv(NCU_CSV), calls=2)["ncu_gpu_time_us"] == pytest.approx(total / 2)
    assert aggregate_ncu([]) == {}


def test_ncu_command_filters_to_the_timed_range(tmp_path: Path) -> None:
    cmd = ncu_command("/opt/ncu", "roofline", tmp_path / "profile")
    text = " ".join(cmd)
    assert "--nvtx --nvtx-include perflab_timed/" in text and "--clock-control none" in text
    assert cmd[cmd.index("--launch-count") + 1].isdigit()
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(NCU_METRICS)
    assert "SpeedOfLight_RooflineChart" in cmd and "--set" not in cmd
    assert ["--set", "full"] == ncu_command("ncu", "full", tmp_path)[-5:-3]
    with pytest.raises(ValueError, match="ncu_preset='max'.*minimal"):
        ncu_command("ncu", "max", tmp_path)


# --------------------------------------------------------------------------------------- verdicts


def test_verdict_from_ncu_counters() -> None:
    mem = verdict(ncu={"ncu_dram_throughput_pct": 91.0, "ncu_sm_throughput_pct": 23.0, "ncu_kernel_count": 2})
    assert mem[0] == "memory" and mem[1].startswith("DRAM 91 % of peak, SM 23 %")
    assert verdict(ncu={"ncu_dram_throughput_pct": 30.0, "ncu_sm_throughput_pct": 85.0})[0] == "compute"
    lat = verdict(ncu={"ncu_dram_throughput_pct": 12.0, "ncu_sm_throughput_pct": 9.0})
    assert lat[0] == "latency" and "neither" in lat[1]


def test_verdict_launch_needs_a_short_call_on_the_device_clock() -> None:
    assert verdict(median_us=2.1, device_clock=True)[0] == "launch"
    # a short call on the host's clock (a CPU variant) is no evidence of launch overhead
    assert verdict(median_us=2.1, device_clock=False, ncu={})[0] == "unknown"
    # a batched but long call falls through to the counters
    long = verdict(median_us=50.0, device_clock=True, ncu={"ncu_dram_throughput_pct": 80, "ncu_sm_throughput_pct": 5})
    assert long[0] == "memory"


def test_verdict_from_roofline_position() -> None:
    near_copy = Roofline(achieved_gbps=2700.0, achieved_tflops=None, copy_gbps=3000.0, peak_tflops=None)
    bound, evidence = verdict(roofline=near_copy)
    assert bound == "memory" and "90 % of the measured copy bandwidth" in evidence
    # 8192^3 bf16 matmul: intensity ~2700 FLOP/B, far right of the ridge (~330): judged on TFLOP/s
    gemm = Roofline(achieved_gbps=0.3, achieved_tflops=700.0, copy_gbps=3000.0, peak_tflops=800.0, dtype="bf16")
    bound, evidence = verdict(roofline=gemm)
    assert bound == "compute" and "bf16 matmul peak" in evidence and "ridge" in evidence
    slow = Roofline(achieved_gbps=300.0, achieved_tflops=None, copy_gbps=3000.0, peak_tflops=None)
    assert verdict(roofline=slow)[0] == "latency"
    none = verdict(roofline=Roofline(None, 1.0, 3000.0, None), missing=("no ncu counters (ncu skipped)",))
    assert none[0] == "unknown" and "ncu skipped" in none[1] and "no roofline" in none[1]


def _timed(median_ms: float, work: Work | None = None) -> VariantResult:
    samples = [median_ms] * 5
    spec = VariantSpec(chapter="ch07", example="x", variant="baseline", path="/x.py")
    timing = Timing(mode="cuda_event", method="m", samples_ms=samples, stats=summarize(samples, [50.0]))
    gpu = {"gpu": {"name": "NVIDIA H100 80GB HBM3"}}
    return VariantResult(spec=spec, status="ok", timing=timing, work=work, device="cuda:0", manifest=gpu)


def test_verdict_reads_the_peak_cache_tolerantly(monkeypatch: pytest.MonkeyPatch) -> None:
    timed = _timed(0.1, work=Work(bytes=270e6))  # 2700 GB/s
    skipped = Profile(tools={"ncu": "skipped: ncu not on PATH"})
    fake = types.ModuleType("bench.measure.ceilings")
    fake.hardware_key = lambda r: "NVIDIA H100 80GB HBM3"  # type: ignore[attr-defined]
    fake.lookup = lambda key: {"copy_gbps": 3000.0} if key == "NVIDIA H100 80GB HBM3" else None  # type: ignore[attr-defined]
    fake.result_dtype = lambda r: "fp32"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench.measure.ceilings", fake)
    import bench.measure

    monkeypatch.setattr(bench.measure, "ceilings", fake)
    bound, evidence = verdict_for(timed, skipped)
    assert bound == "memory" and "roofline" in evidence
    fake.lookup = lambda key: None  # type: ignore[attr-defined]
    bound, evidence = verdict_for(timed, skipped)
    assert bound == "unknown" and "no measured ceilings for 'NVIDIA H100 80GB HBM3'" in evidence
    assert "ncu skipped: ncu not on PATH" in evidence

    def broken(key: str) -> None:
        raise ValueError("peak cache /x/peaks.json is not valid JSON")

    fake.lookup = broken  # type: ignore[attr-defined]
    bound, evidence = verdict_for(timed, skipped)
    assert bound == "unknown" and "peak cache unreadable" in evidence and "not valid JSON" in evidence
    assert verdict_for(_timed(0.002), skipped)[0] == "launch"


# ---------------------------------------------------------------------------------- NVTX markers


def test_nvtx_range_public_and_per_call_costs_nothing_without_a_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "nvtx_range" in bench.__all__
    with bench.nvtx_range("user range"):
        pass
    fn = lambda: 7  # noqa: E731
    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)
    assert markers.per_call(fn) is fn  # the timed child runs benchmark_fn itself, unwrapped
    if markers._module() is not None:
        monkeypatch.setenv("NVTX_INJECTION64_PATH", "/nonexistent/libinjection.so")
        wrapped = markers.per_call(fn)
        assert wrapped is not fn and wrapped() == 7


# ------------------------------------------------------------- the profile child, end to end (CPU)


@pytest.fixture
def no_nsight(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name in ("ncu", "nsys") else real(name, *a, **k))


@pytest.fixture
def example(chapters: Callable[[dict[str, dict[str, Any]]], Path]) -> Any:
    tree = chapters({"ch07/baseline_p.py": {}, "ch07/optimized_p.py": {}})
    return select(discover(tree), ["ch07:p"])


def test_profile_runs_in_its_own_child_and_is_logged(example: Any, tmp_path: Path, no_nsight: None) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    wd = tmp_path / "wd"
    with Tracker(experiment="perflab-profile-test", tracking_uri=uri) as tracker:
        suite = run_suite(example, cli_layer={**CPU, "enable_profiling": True, "profile_mode": "all"}, sink=tracker,
                          workdir=wd, keep_workdir=True)  # fmt: skip
    base = suite.variants[0]
    assert base.status == "ok" and base.timing is not None and base.timing.stats.n == 5
    # the timed child ran no profiling stage: its samples carry no profiler
    assert [s.name for s in base.stages] == [
        "startup",
        "setup",
        "warmup",
        "measurement",
        "check",
        "batch",
        "recheck",
        "teardown",
    ]
    vdir = wd / "ch07" / "p" / "baseline"
    assert json.loads((vdir / "job.json").read_text())["mode"] == "run"
    job = json.loads((vdir / "profile-torch" / "job.json").read_text())
    assert (job["mode"], job["profile_tool"]) == ("profile", "torch")
    p = base.profile
    assert p is not None and p.tools["torch"] == "ok"
    assert p.tools["ncu"] == "skipped: ncu not on PATH" and p.tools["nsys"] == "skipped: nsys not on PATH"
    assert p.top_ops and p.metrics["prof_top1_pct"] > 0 and p.bound == "unknown"
    # where the profile's time went: the child's stages, its profiling stage in parts
    split = p.split_s
    assert {"startup", "setup", "warmup", "profiling", "teardown"} <= set(split) and p.wall_s is not None
    assert sum(split[k] for k in ("startup", "setup", "warmup", "profiling", "teardown")) <= p.wall_s
    parts = ("torch_calls", "torch_stop", "torch_export", "torch_summary")
    assert all(split[k] >= 0 for k in parts) and sum(split[k] for k in parts) <= split["profiling"]
    trace = json.loads(gzip.decompress((Path(p.dir or "") / "trace.json.gz").read_bytes()))
    assert trace["traceEvents"]  # a real torch.profiler Chrome trace

    client = MlflowClient(uri)
    run = client.get_run(tracker.run_id("ch07:p:baseline") or "")
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "profile")}
    assert {"profile/trace.json.gz", "profile/top_ops.csv", "profile/top_ops.md"} <= arts
    assert run.data.metrics["prof_top1_pct"] == pytest.approx(p.metrics["prof_top1_pct"])
    assert "time_median_ms" in run.data.metrics and not any(k.startswith("ncu_") for k in run.data.metrics)
    tags = run.data.tags
    assert tags["perflab.profile_ncu"] == "skipped: ncu not on PATH"
    assert tags["perflab.bound"] == "unknown" and "ncu not on PATH" in tags["perflab.bound_evidence"]


def test_profile_off_by_default_runs_no_profile_child(example: Any, tmp_path: Path) -> None:
    suite = run_suite(example[:1], cli_layer=CPU, workdir=tmp_path, keep_workdir=True)
    assert suite.variants[0].profile is None
    assert not (tmp_path / "ch07" / "p" / "baseline" / "profile-torch").exists()


def test_ncu_on_path_but_cpu_variant_is_skipped_with_reason(
    example: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/local/bin/{name}")
    spec = example[0].variants[0]
    r = profile_variant(spec, tmp_path, cli_layer={**CPU, "profile_mode": "ncu"})
    assert r.status == "skipped" and r.profile is not None
    assert r.skip_reason == "ncu profiles CUDA kernels; the variant ran on cpu"  # the console's line says why
    assert r.profile.tools == {"ncu": "skipped: ncu profiles CUDA kernels; the variant ran on cpu"}
    assert r.profile.bound == "unknown" and "ncu skipped" in (r.profile.bound_evidence or "")


def test_cli_profile_command_and_bad_preset(example: Any, chapters: Any, no_nsight: None) -> None:
    tree = Path(example[0].variants[0].path).parents[1]
    out = CliRunner().invoke(app, ["profile", "ch07:p", "--chapters-dir", str(tree), "--device", "cpu", "--no-track"])
    assert out.exit_code == 0, out.output
    assert out.output.count("bound: unknown") == 2 and "torch ok" in out.output
    nsys = CliRunner().invoke(app, ["profile", "ch07:p", "--chapters-dir", str(tree), "--device", "cpu", "--no-track",
                                    "--profile-mode", "nsys"])  # fmt: skip
    assert nsys.exit_code == 0 and nsys.output.count("(nsys not on PATH)") == 2, nsys.output
    bad = CliRunner().invoke(app, ["run", "-t", "ch07:p", "--chapters-dir", str(tree), "--ncu-preset", "max"])
    assert bad.exit_code != 0 and "ncu_preset='max'" in str(bad.exception)
